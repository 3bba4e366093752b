"""experiments.value_ceiling: the branch bookkeeping on real rollouts, the CLI on a real PPO run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from algos.critic_points import PointData
from algos.requests import RolloutRequest
from entry import run_entry
from experiments.compare.job import TINY_PRESET
from experiments.value_ceiling import (THIRDS, bootstrap, branch, clusters_of, forced_prefix, load_run, measure_points,
                                      sampled_tokens, third_of, turn_of, turn_rewards)
from experiments.runtime.build import train_engine

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory, shared_warmstart_cache):
    """A learn_tiny PPO run of 2 updates (tutorial tasks, the BC start model writes real tool calls)."""
    d = tmp_path_factory.mktemp("vc")
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    proc = run_entry("experiments.train", ["experiment=learn_tiny", "algo=ppo", "budget.amount=16", "eval.tasks=2",
                                           f"run_dir={d / 'run'}", f"warmstart.cache_dir={shared_warmstart_cache}"], cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return d / "run"


@pytest.fixture(scope="module")
def v3_run(tmp_path_factory, shared_warmstart_cache):
    """A PPO run of the horizon preset (LongHorizon-v3, structured_summary compression: no tool
    stream) shrunk by compare's --tiny (the tiny preset: 2 updates of 2 tasks x G=4) to 4 stages."""
    d = tmp_path_factory.mktemp("vc3")
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    proc = run_entry("experiments.train", ["experiment=compare_horizon", "algo=ppo", TINY_PRESET, "env.kwargs.n_stages=4",
                                           "eval.every=0", "logger.kind=none", f"run_dir={d / 'run'}",
                                           f"warmstart.cache_dir={shared_warmstart_cache}"], cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return d / "run"


def test_points_prefixes_and_branch_returns(ppo_run):
    torch.set_num_threads(1)
    c, policy, critic = load_run(ppo_run)
    trajs, points, ev_all = measure_points(c, policy, critic, rollouts=8, seed=0)
    data = PointData(trajs, c.algo.value_level, c.algo.gamma)
    assert len(points) == int((data.layout.mask & torch.tensor([t.terminated for t in trajs])[:, None]).sum())
    for p in points:
        t = trajs[p.traj]
        # gamma 1: a point's Monte Carlo return is the sum of its turn's and the later turns' rewards
        assert p.ret == pytest.approx(sum(turn_rewards(t)[p.turn:]))
        prefix = forced_prefix(t, p.segment, p.col)
        assert list(prefix) == sampled_tokens(t)[:len(prefix)]
        seg = t.segments[p.segment]
        assert seg.action_mask[p.col] == 1 and len(prefix) == sum(seg.action_mask[:p.col])
        assert turn_of(t, p.segment, p.col) == p.turn and p.turns == len(turn_rewards(t))
    # the first point of every trajectory is its first sampled token: nothing forced, turn 0
    firsts = [p for p in points if p.col == min(q.col for q in points if q.traj == p.traj)]
    assert all(forced_prefix(trajs[p.traj], p.segment, p.col) == () and p.turn == 0 for p in firsts)
    # branching the LAST point of a trajectory from every sampled token but its final one
    last = max((p for p in points if p.traj == points[0].traj), key=lambda p: p.col)
    returns, valid, reseeded = branch(c, policy, trajs, [last], branches=3, seed=0)
    # (branch raises unless every branch replayed the trajectory token by token up to the point)
    assert returns.shape == (1, 3) and valid.dtype == torch.bool
    assert reseeded  # BugFix has a tool stream: every branch re-seeds it


def test_cli_prints_and_writes_the_ceiling(ppo_run, tmp_path):
    out = tmp_path / "vc.json"
    proc = run_entry("experiments.value_ceiling", [str(ppo_run), "--rollouts", "16", "--points", "40", "--branches", "3",
                                                  "--boot", "50", "--out", str(out)], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "EV* (true value, ceiling)" in proc.stdout and "critic EV / EV*" in proc.stdout
    r = json.loads(out.read_text())
    assert r["branches"] == 3 and r["rollouts"] == 16 and 2 <= r["points"] <= 40
    assert r["ceiling"] <= 1.0 and r["points_all"] >= r["points"]
    assert r["env_reseeded"] is True and list(r["thirds"]) == list(THIRDS)
    assert sum(t["points"] for t in r["thirds"].values()) == r["points"]


def test_a_point_at_turn_t_of_T_turns_is_in_third_min_2_3t_div_T():
    # turns 0..8 of a 9-turn trajectory: 3 early, 3 middle, 3 late
    assert [third_of(t, 9) for t in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    # 10 turns: 3 t // 10 is 0 for t <= 3, 1 for 4..6, 2 for 7..9
    assert [third_of(t, 10) for t in range(10)] == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [third_of(t, 2) for t in range(2)] == [0, 1] and third_of(0, 1) == 0
    with pytest.raises(ValueError, match="turn 9 out of range"):
        third_of(9, 9)


def test_clusters_group_a_parts_points_by_trajectory_in_trajectory_order():
    owners = [4, 4, 1, 7, 1, 4]  # the trajectory of each kept point
    assert clusters_of(owners, [0, 1, 2, 3, 4, 5]) == [[2, 4], [0, 1, 5], [3]]
    assert clusters_of(owners, [1, 3, 5]) == [[1, 5], [3]]  # one part: only its own points
    assert clusters_of(owners, []) == []


def test_branches_of_an_env_without_a_tool_stream_replay_the_prefix_then_sample_apart(v3_run):
    torch.set_num_threads(1)
    c, policy, critic = load_run(v3_run)
    trajs, points, _ = measure_points(c, policy, critic, rollouts=4, seed=0)
    t = trajs[points[0].traj]
    prefix = tuple(sampled_tokens(t)[:2])
    engine = train_engine(c, num_envs=4)
    out = engine.collect(policy, [RolloutRequest(t.options, seed=t.seed, forced=prefix) for _ in range(4)],
                         generator=torch.Generator().manual_seed(1))
    engine.close()
    assert all(tuple(sampled_tokens(b)[:2]) == prefix for b in out)
    # after the prefix every slot samples with its own uniforms: the continuations are not all one
    assert len({tuple(sampled_tokens(b)[2:]) for b in out}) > 1
    last = max((p for p in points if p.traj == points[0].traj), key=lambda p: p.col)
    returns, valid, reseeded = branch(c, policy, trajs, [points[0], last], branches=2, seed=0)
    assert not reseeded and returns.shape == valid.shape == (2, 2)


def test_cli_on_long_horizon_v3_writes_the_ceiling_per_third(v3_run, tmp_path):
    out = tmp_path / "vc3.json"
    proc = run_entry("experiments.value_ceiling", [str(v3_run), "--rollouts", "8", "--points", "24", "--branches", "2",
                                                  "--boot", "20", "--out", str(out)], cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "policy's samples only" in proc.stdout and "per third of the episode" in proc.stdout
    r = json.loads(out.read_text())
    assert r["env_reseeded"] is False and list(r["thirds"]) == list(THIRDS)
    assert sum(t["points"] for t in r["thirds"].values()) == r["points"] <= 24
    for t in r["thirds"].values():
        assert set(t) == {"points", "critic_ev", "critic_ev_ci", "ceiling", "ceiling_ci"}


def test_the_bootstrap_resamples_whole_trajectories():
    seen = []
    lo, hi = bootstrap(lambda i: seen.append(i.tolist()) or float(len(i)), [[0, 1, 2], [3]], 200, seed=0)
    # two clusters drawn with replacement: {A, A} -> 6 indices, {A, B} -> 4, {B, B} -> 2
    assert {len(x) for x in seen} == {2, 4, 6} and (lo, hi) == (2.0, 6.0)
    assert all(x.count(0) == x.count(1) == x.count(2) for x in seen)  # a trajectory's points go together


@pytest.mark.parametrize("argv, message", [
    (["--branches", "1"], "--branches=1 invalid; allowed: an int >= 2"),
    (["--points", "0"], "--points=0 invalid; allowed: an int >= 2"),
])
def test_bad_arguments_are_one_line_errors(ppo_run, argv, message):
    proc = run_entry("experiments.value_ceiling", [str(ppo_run), *argv], cwd=ROOT)
    assert proc.returncode == 2 and message in proc.stderr


def test_a_directory_without_a_run_is_an_error(tmp_path):
    proc = run_entry("experiments.value_ceiling", [str(tmp_path)], cwd=ROOT)
    assert proc.returncode == 2 and f"run_dir={tmp_path} has no config.yaml" in proc.stderr
