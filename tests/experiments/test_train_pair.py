"""Two agents from the main entry point: ``experiments.train algo=ppo_ctde|ppo_independent
env=pairfix`` (config composition, the bad combinations, a tiny end-to-end run per algorithm)."""

import json
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from algos.metric_keys import undeclared, wall_clock
from entry import run_entry
from experiments.runtime.config import register_configs, validate
from experiments.runtime.schema import ConfigError, is_pair_run
from experiments.runtime.build import policy_shape, train_engine
from experiments.runtime.pair import check_pair_run, critic_shape, eval_episodes, pair_algo_config, pair_updates

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = str(ROOT / "configs")
register_configs()


def cfg(*overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_pairfix_composes_and_the_pair_run_reads_it(algo):
    c = validate(cfg(f"algo={algo}", "env=pairfix", "budget.amount=100", "algo.tasks_per_update=16"))
    assert is_pair_run(c) and c.env.id == "agentrl/PairFix-v2" and c.algo.value_level == "turn"
    # 100 pair episodes at 16 per update: ceil(100 / 16) = 7 updates
    assert pair_updates(c) == 7 and c.algo.tasks_per_update == 16 and c.algo.name == algo
    # eval: 40 tasks x 2 samples (configs/eval/default) = 80 episodes over task indices 0..39
    assert eval_episodes(c) == 80 and c.eval.tasks == 40 and c.eval.split == "heldout"
    policy, critic = policy_shape(c), critic_shape(c)
    # policy=tiny: max_len 512; the centralized critic reads own + other + 2 separators: 2 * 512 + 2
    assert policy.max_len == 512 and critic.max_len == (1026 if algo == "ppo_ctde" else 512)
    algo_config = pair_algo_config(c)
    assert algo_config.epochs == 2 and algo_config.minibatches == 2 and algo_config.group_size == 1


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["algo=ppo_ctde", "env=bugfix"], "algo=ppo_ctde trains two agents but env=bugfix has one; allowed envs: pairfix"),
        (["algo=ppo_independent", "env=long_horizon"], "algo=ppo_independent trains two agents but env=long_horizon"),
        (["algo=grpo", "env=pairfix"], "env=pairfix has two agents but algo=grpo trains one; allowed algos: ppo_independent, ppo_ctde"),
        (["algo=ppo", "env=pairfix"], "env=pairfix has two agents but algo=ppo trains one"),
        (["algo=ppo_ctde", "env=pairfix", "algo.frozen=[c]"], "algo.frozen=['c'] is invalid; allowed: distinct agents of a, b"),
        (["algo=ppo_ctde", "env=pairfix", "algo.frozen=[a,a]"], "algo.frozen=['a', 'a'] is invalid"),
        (["algo=ppo_ctde", "env=pairfix", "algo.frozen=[b]", "algo.shared_policy=true"], "needs algo.shared_policy=false"),
        (["algo=ppo_ctde", "env=pairfix", "algo.value_level=token"], "algo.value_level='token' is invalid for ppo_ctde"),
        (["algo=ppo_ctde", "env=pairfix", "policy.critic=head"], "policy.critic='head' is invalid for algo=ppo_ctde; allowed: separate"),
        (["algo=ppo_ctde", "env=pairfix", "compression=recent"], "compression.strategy='recent' is not supported for env=pairfix"),
        (["algo=ppo_ctde", "env=pairfix", "budget=tool_seconds"], "budget.kind='tool_seconds' is not supported for env=pairfix"),
        (["algo=ppo_ctde", "env=pairfix", "eval.temperature=0"], "eval.temperature=0.0 is not supported for env=pairfix"),
        (["algo=ppo_ctde", "env=pairfix", "++env.kwargs.max_message_words=40"], "env.kwargs of env agentrl/PairFix-v2: max_message_words=40"),
    ],
)
def test_bad_pair_combinations_are_one_line_errors(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate(cfg(*overrides))
    assert message in str(e.value) and "\n" not in str(e.value)


TINY = ["warmstart.demos=8", "warmstart.epochs=1", "budget.amount=8", "algo.tasks_per_update=4", "eval.tasks=2",
        "eval.samples_per_task=1", "policy.d_model=16", "policy.n_heads=2", "policy.n_layers=1", "policy.max_len=384",
        "progress=false"]


def train_cli(tmp_path, *overrides):
    """``python -m experiments.train ...`` from ``tmp_path``, in this process (tests/entry.py)."""
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    return run_entry("experiments.train", [f"warmstart.cache_dir={tmp_path / 'ws'}", *overrides], cwd=tmp_path, env=env)


@pytest.mark.slow
def test_bad_combination_exits_2_before_compute(tmp_path):
    done = train_cli(tmp_path, "algo=ppo_ctde", "env=bugfix", f"run_dir={tmp_path / 'run'}")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "config error: algo=ppo_ctde trains two agents but env=bugfix has one; allowed envs: pairfix (or a single-agent "
        "algo: grpo, ppo, ppo_segment_terminal, ppo_long, rloo, gigpo, grpo_process, grouped_value)"]
    assert not (tmp_path / "run").exists() and not (tmp_path / "ws").exists()


def run_in_process(tmp_path, monkeypatch, capsys, *overrides):
    """``experiments.runtime.loop.run`` on the composed, validated config (what ``main`` does after the
    Hydra parse; in-process to keep the test small)."""
    from omegaconf import OmegaConf

    from experiments.runtime.loop import run

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    composed = cfg(*overrides, f"warmstart.cache_dir={tmp_path / 'ws'}")
    summary = run(validate(composed), resolved=OmegaConf.to_container(composed, resolve=True))
    return summary, capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("algo, extra", [("ppo_ctde", ["logger=wandb"]), ("ppo_independent", ["logger=none", "algo.frozen=[b]"])])
# ppo_ctde logs to wandb (offline); ppo_independent freezes b and is run again to check the resume
def test_pair_training_end_to_end(tmp_path, monkeypatch, capsys, algo, extra):
    run = tmp_path / "run"
    overrides = [f"algo={algo}", "env=pairfix", f"run_dir={run}", *TINY, *extra]
    summary, _ = run_in_process(tmp_path, monkeypatch, capsys, *overrides)
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "checkpoints/last.pt"):
        assert (run / name).exists(), name
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    # 8 pair episodes at 4 per update: 2 updates; compute/rollouts counts pair episodes
    assert [r["update"] for r in rows] == [1, 2] and [r["compute/rollouts"] for r in rows] == [4, 8]
    assert all(r["algo"] == algo and r["rollout/episodes"] == 4 for r in rows)
    assert all(r["rollout/success_rate"] == r["rollout/success"] for r in rows)  # the compare report's name
    for agent in ("a", "b"):
        for key in ("rollout/success", f"rollout/success_bug_in_{agent}_only", "rollout/file_fixed", "rollout/turns",
                    "rollout/messages_sent", "rollout/format_error_rate", "eval/success"):
            assert f"agent_{agent}/{key}" in rows[-1], (agent, key)
    trained = ["a"] if algo == "ppo_independent" else ["a", "b"]  # algo.frozen=[b]: b is never updated
    for agent in ("a", "b"):
        assert (f"agent_{agent}/train/policy_loss" in rows[0]) == (agent in trained)
    assert summary["algo"] == algo and summary["updates"] == 2 and summary["eval/episodes"] == 2
    assert summary["critic"] == ("central" if algo == "ppo_ctde" else "local")
    assert undeclared([*summary, *(k for r in rows for k in r)]) == []  # the metric contract knows every key
    assert (run / "wandb").exists() == (extra[0] == "logger=wandb")
    assert list((tmp_path / "ws").glob("*/policy_a.pt"))  # the pair warm start was cached
    if algo == "ppo_ctde":
        return
    # the same config again resumes from the last checkpoint: nothing is redone
    again, err = run_in_process(tmp_path, monkeypatch, capsys, *overrides)
    assert "resumed" in err and again["eval/success"] == summary["eval/success"]
    assert [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()] == rows


@pytest.mark.slow
def test_pair_training_is_deterministic(tmp_path, monkeypatch, capsys):
    out = []
    for name in ("one", "two"):
        run = tmp_path / name
        run_in_process(tmp_path, monkeypatch, capsys, "algo=ppo_independent", "env=pairfix", f"run_dir={run}", *TINY,
                       "logger=none")
        out.append([{k: v for k, v in json.loads(x).items() if not wall_clock(k)}
                    for x in (run / "metrics.jsonl").read_text().splitlines()])
    assert out[0] == out[1]


@pytest.mark.slow
def test_every_run_seed_starts_from_one_cached_start_model(tmp_path, monkeypatch, capsys):
    """The compare protocol: both algorithms and every run seed start from the same warm start
    (keyed by warmstart.seed, not the run seed). Seed 1 runs first and builds it; seed 0 then loads
    it; a fresh cache built by seed 0 itself holds the same weights (so which seed builds it first
    does not matter)."""
    import torch

    summaries = []
    for seed, algo in ((1, "ppo_independent"), (0, "ppo_ctde")):
        s, _ = run_in_process(tmp_path, monkeypatch, capsys, f"algo={algo}", "env=pairfix", f"seed={seed}",
                              f"run_dir={tmp_path / f'run{seed}'}", *TINY, "logger=none")
        summaries.append(s)
    (path,) = {s["start_model/path"] for s in summaries}
    assert Path(path).parent == tmp_path / "ws" and (Path(path) / "policy_a.pt").exists()
    built_by_seed_1 = torch.load(Path(path) / "policy_a.pt", weights_only=True)
    fresh = tmp_path / "fresh"
    s0, _ = run_in_process(fresh, monkeypatch, capsys, "algo=ppo_independent", "env=pairfix", "seed=0",
                           f"run_dir={fresh / 'run'}", *TINY, "logger=none")
    built_by_seed_0 = torch.load(Path(s0["start_model/path"]) / "policy_a.pt", weights_only=True)
    assert Path(s0["start_model/path"]).name == Path(path).name
    assert all(torch.equal(built_by_seed_1[k], built_by_seed_0[k]) for k in built_by_seed_1)


def test_the_pair_run_refuses_a_one_agent_config_and_derives_its_sizes():
    with pytest.raises(ConfigError) as e:
        check_pair_run(validate(cfg("algo=grpo", "env=bugfix")))
    assert str(e.value) == "env.name='bugfix' is not a two-agent env: a pair run needs env in pairfix"
    c = validate(cfg("algo=ppo_ctde", "env=pairfix"))
    # budget.amount=1024 pair episodes at tasks_per_update 8 (AlgoConfig default): 128 updates;
    # the one training engine: num_envs = min(rollout.num_envs 64, 8 x group_size 1) = 8, its agents the
    # env's; d_model 64 (policy=tiny = PolicyConfig default)
    engine = train_engine(c)
    assert (pair_updates(c), c.algo.tasks_per_update, engine.num_envs, c.policy.d_model) == (128, 8, 8, 64)
    assert engine.agents == ("a", "b")
    engine.close()


@pytest.mark.slow
def test_pair_run_stops_on_sigterm_and_resumes_exactly(tmp_path):
    """SIGTERM after update 2 of 4 (a checkpoint is on disk) exits 130; the same command then
    resumes and writes the same metrics lines as an uninterrupted run (wall-clock fields aside).
    The signalled run and its resume are subprocesses; the uninterrupted reference runs in this
    process (tests/entry.py), so the numbers must also agree across that boundary."""
    import signal
    import subprocess
    import sys
    import time

    common = ["algo=ppo_independent", "env=pairfix", *TINY, "budget.amount=16", "eval.every=2", "logger=none",
              f"warmstart.cache_dir={tmp_path / 'ws'}"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def rows(run):
        return [{k: v for k, v in json.loads(x).items() if not wall_clock(k)}
                for x in (run / "metrics.jsonl").read_text().splitlines()]

    def cmd(run):
        return [sys.executable, "-m", "experiments.train", *common, f"run_dir={run}"]

    whole = tmp_path / "whole"
    done = run_entry("experiments.train", cmd(whole)[3:], cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    cut = tmp_path / "cut"
    proc = subprocess.Popen(cmd(cut), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if (cut / "metrics.jsonl").exists() and len((cut / "metrics.jsonl").read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate()[1].decode()
    assert proc.returncode == 130, err
    assert "interrupted at update" in err and 2 <= len(rows(cut)) < 4
    again = subprocess.run(cmd(cut), cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    assert "resumed" in again.stderr
    assert rows(cut) == rows(whole) and len(rows(whole)) == 4
