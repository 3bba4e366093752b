"""experiments/train.py end to end, the way users run it (``python -m experiments.train ...``) with a
tiny config: in the test process (tests/entry.py's ``run_entry``, no ~6-7 s of imports per run) but
for the kill -9 test, whose killed run and its resume are real subprocesses."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from algos.metric_keys import undeclared, wall_clock
from entry import run_entry
from experiments.runtime.loop import KILL_AFTER_UPDATE_ENV

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow



@pytest.fixture(scope="session")
def ws_cache(shared_warmstart_cache):
    return str(shared_warmstart_cache)


def train(run_dir, *overrides, ws_cache, check=True, timeout=300, kill_after=None, in_process=True):
    """``python -m experiments.train`` (the tiny preset unless an ``experiment=`` override) from the
    repository root: in this process, or as a subprocess when ``in_process`` is False or
    ``kill_after`` is set (the run SIGKILLs its own process after that update)."""
    preset = [] if any(o.startswith("experiment=") for o in overrides) else ["experiment=tiny"]
    args = [*preset, "env=bugfix", f"run_dir={run_dir}", f"warmstart.cache_dir={ws_cache}", *overrides]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    env.pop(KILL_AFTER_UPDATE_ENV, None)
    if kill_after is not None:
        env[KILL_AFTER_UPDATE_ENV] = str(kill_after)
    if in_process and kill_after is None:
        proc = run_entry("experiments.train", args, cwd=ROOT, env=env)
    else:
        proc = subprocess.run([sys.executable, "-m", "experiments.train", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout, env=env)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def lines(run_dir):
    return [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_train_writes_run_directory(tmp_path, ws_cache, algo):
    run_dir = tmp_path / algo
    # GRPO: 2 tasks x G=4 = 8 rollouts per update (the tiny preset's), logged to an offline wandb run as well
    extra = ["algo.group_size=4", "logger.kind=wandb"] if algo == "grpo" else []
    train(run_dir, f"algo={algo}", *extra, ws_cache=ws_cache)
    # logger=wandb writes an offline run and sends nothing; the default logger of the tiny preset
    # (none) writes no wandb directory
    assert bool(list((run_dir / "wandb").glob("offline-run-*"))) == (algo == "grpo")
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "checkpoints/last.pt"):
        assert (run_dir / name).exists(), name
    rows = lines(run_dir)
    assert [r["update"] for r in rows] == list(range(1, len(rows) + 1))
    assert all(r["algo"] == algo for r in rows)
    # compute counters are cumulative and the budget (the tiny preset's 16 rollouts: 2 updates of 2 tasks x 4) was spent
    assert rows[-1]["compute/rollouts"] >= 16 and rows[-1]["compute/train_flops"] > rows[0]["compute/train_flops"]
    for key in ("rollout/success_rate", "rollout/mixed_group_rate", "rollout/all_zero_rate", "rollout/all_one_rate",
                "train/policy_loss", "train/clip_frac", "train/entropy", "train/grad_norm", "train/agg_weight_shift"):
        assert key in rows[0], key
    assert any(k.startswith("rollout/stop/") for k in rows[0])
    assert "eval/success" in rows[-1]
    if algo == "ppo":
        assert "critic/explained_variance_heldout" in rows[-1] or "critic/heldout_points" in rows[-1]
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in ("eval/success", "eval/test_budget", "eval/recovery_rate", "eval/hack_rate", "eval/mean_turns",
                "compute/rollouts", "compute/generated_tokens", "compute/train_flops", "start_model/path",
                "start_model/success"):
        assert key in summary, key
    assert Path(summary["start_model/path"]).exists()
    # every namespaced key the run wrote is declared in the metric contract (algos/metric_keys.py)
    assert undeclared([*summary, *(k for r in rows for k in r)]) == []
    config = (run_dir / "config.yaml").read_text()
    assert f"name: {algo}" in config
    # the final evaluation leaves transcripts to look at: each a real held-out episode, its outcome
    # label matching the verifier, sampled text marked apart from environment text
    records = json.loads((run_dir / "transcripts.json").read_text())["transcripts"]
    assert 1 <= len(records) <= 2 and len({r["outcome"] for r in records}) == len(records)
    for r in records:
        assert (r["outcome"] == "success") == (r["verified"] == 1)
        assert "«" in r["text"] and r["stop_reason"] in r["text"]


def test_bad_config_fails_fast_with_one_line(tmp_path, ws_cache):
    run_dir = tmp_path / "bad"
    proc = train(run_dir, "algo=grpo", "algo.group_size=1", ws_cache=ws_cache, check=False)
    assert proc.returncode == 2
    err = [line for line in proc.stderr.splitlines() if line.strip()]
    assert err == ["config error: algo.group_size=1 is invalid for GRPO: group-relative advantages need at "
                   "least 2 rollouts per task (use algo=ppo for G=1)"]
    assert not run_dir.exists(), "nothing may be computed or written before validation"
    proc = train(run_dir, "algo=foo", ws_cache=ws_cache, check=False)
    assert proc.returncode != 0 and "algo/foo" in proc.stderr
    # env constructor kwargs and the compression wrapper's are checked by building them once
    for overrides, pattern in (  # the env's own one-line message after the field and the env id
        (["++env.kwargs.difficulty=insane"], r"config error: env\.kwargs of env agentrl/BugFix-v\d+: .*'insane'.*allowed: "),
        # the README's form, without '+': configs/env/bugfix.yaml declares the difficulty
        (["env.kwargs.difficulty=insane"], r"config error: env\.kwargs of env agentrl/BugFix-v\d+: .*'insane'.*allowed: "),
        (["compression=recent", "compression.budget_tokens=128", "compression.keep_last=-3"],
         r"config error: compression of env agentrl/BugFix-v\d+: keep_last must be an int >= 1"),
    ):
        proc = train(run_dir, "algo=grpo", *overrides, ws_cache=ws_cache, check=False)
        err = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(err) == 1 and re.match(pattern, err[0]), proc.stderr
        assert not run_dir.exists()


def test_kill_9_and_rerun_reproduces_the_uninterrupted_run(tmp_path, ws_cache):
    common = ["algo=ppo", "budget.amount=40", "algo.tasks_per_update=8", "algo.group_size=1", "eval.every=2"]
    full = tmp_path / "full"
    train(full, *common, ws_cache=ws_cache)  # the reference, in-process: equal numbers across the boundary too
    killed = tmp_path / "killed"
    proc = train(killed, *common, ws_cache=ws_cache, check=False, kill_after=3)  # a subprocess
    assert proc.returncode == -9  # SIGKILL after update 3's metrics line, before its checkpoint
    assert len(lines(killed)) == 3
    train(killed, *common, ws_cache=ws_cache, in_process=False)  # the same command again (without the test aid)
    a, b = lines(full), lines(killed)
    assert len(a) == len(b) == 5
    for ra, rb in zip(a, b):
        assert {k: v for k, v in ra.items() if not wall_clock(k)} == {k: v for k, v in rb.items() if not wall_clock(k)}
    sa = json.loads((full / "summary.json").read_text())
    sb = json.loads((killed / "summary.json").read_text())
    assert sa["eval/success"] == sb["eval/success"] and sa["compute/train_flops"] == sb["compute/train_flops"]


def test_staleness_separates_behavior_and_old_logprobs(tmp_path, ws_cache):
    """C7: with rollout.staleness=1 the sampler is one update behind: behavior log-probs (stored at
    sampling) differ from the old log-probs recomputed at update time; in sync mode they agree."""
    run_dir = tmp_path / "stale"
    train(run_dir, "algo=grpo", "algo.group_size=4", "rollout.staleness=1", "budget.amount=48",
          "algo.entropy_coef=0.01", ws_cache=ws_cache)  # the entropy term moves the weights every update
    rows = lines(run_dir)
    assert rows[0]["sampler_version"] == 0 and rows[1]["sampler_version"] == 0 and rows[2]["sampler_version"] == 1
    assert rows[0]["train/behavior_old_logp_gap"] < 1e-4  # nothing trained yet: same weights
    assert rows[1]["train/behavior_old_logp_gap"] > 1e-3  # sampled by v0, old = v1
    assert rows[1]["train/is_weight"] != 1.0


@pytest.mark.parametrize("algo, extra", [("grpo", []), ("ppo", ["algo.tasks_per_update=16", "algo.critic_epochs=2"])])
def test_short_run_improves_over_the_start_model(tmp_path, ws_cache, algo, extra):
    """configs/experiment/learn_tiny: 8 tutorial BugFix-v2 tasks, a ~0.3 warm start, 640 rollouts
    of RL at seeds 0 and 1. Success on those tasks (fixed eval seeds, 256 attempts, binomial SE
    ~0.03) must beat the start model's (256 attempts on the same tasks) on each seed by 0.05 and
    on the two seeds' mean by 0.12 (3.7 standard errors of that mean's difference with the start:
    sqrt(0.029^2 + 0.03^2 / 2) = 0.036). Measured with this test's runs at seeds 0-3 from a start
    of 0.302: GRPO 0.494 / 0.516 / 0.498 / 0.531; PPO with two critic-only passes per batch 0.600 /
    0.680 / 0.547 / 0.563. Without them PPO's first updates follow an untrained critic and seed 0
    collapsed into format errors (0.000; seeds 1-3: 0.469 / 0.411 / 0.618)."""
    gains = []
    for seed in (0, 1):
        run_dir = tmp_path / f"{algo}-s{seed}"
        train(run_dir, "experiment=learn_tiny", f"algo={algo}", f"seed={seed}", *extra, ws_cache=ws_cache)
        summary = json.loads((run_dir / "summary.json").read_text())
        start, final = summary["start_model/success"], summary["eval/success"]
        assert 0.05 < start < 0.5 and summary["eval/episodes"] == 256
        gains.append(final - start)
    assert min(gains) >= 0.05 and sum(gains) / 2 >= 0.12, gains


