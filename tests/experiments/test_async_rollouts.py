"""``rollout.mode=async``: a sampler process beside the trainer (experiments/runtime/async_sampler.py).

Batch ``u`` is sampled with version ``max(0, u - k)`` in both modes, from the same streams, so an
async run's metrics equal the simulated lag's (``rollout.mode=sync``, same staleness), wall-clock
keys aside; and they still do after the sampler is SIGKILLed mid-run and after the trainer is
SIGKILLed, each followed by the same command again."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from entry import run_entry
from algos.metric_keys import wall_clock
from experiments.runtime.async_sampler import KILL_SAMPLER_ENV, needed_version
from experiments.runtime.behavior import BehaviorPolicy
from experiments.runtime.loop import KILL_AFTER_UPDATE_ENV

ROOT = Path(__file__).resolve().parents[2]
# PPO, 8 rollouts per update (8 tasks x G=1), 5 updates, staleness 2
COMMON = ["experiment=tiny", "env=bugfix", "algo=ppo", "budget.amount=40", "algo.tasks_per_update=8", "algo.group_size=1",
          "eval.every=2", "rollout.staleness=2"]


def test_needed_version_lags_by_the_staleness_from_the_start_model():
    # k = 2: batches 0, 1, 2 use the start model (version 0), then batch u uses u - 2
    assert [needed_version(u, 2) for u in range(6)] == [0, 0, 0, 1, 2, 3]
    assert [needed_version(u, 1) for u in range(3)] == [0, 0, 1]


def test_versioned_names_each_snapshot_by_its_version():
    policy = torch.nn.Linear(2, 1)
    b = BehaviorPolicy(policy, staleness=2, local=False)
    assert [v for v, _ in b.versioned()] == [0]
    for step in range(4):
        with torch.no_grad():
            policy.weight.fill_(float(step + 1))
        b.push(policy)
    # 4 updates pushed, 3 snapshots kept: versions 2, 3, 4 holding the weights written before pushes 2, 3, 4
    assert [(v, t["weight"][0, 0].item()) for v, t in b.versioned()] == [(2, 2.0), (3, 3.0), (4, 4.0)]


def test_bfloat16_sampler_is_a_cast_copy_and_float32_samples_with_the_policy():
    policy = torch.nn.Linear(2, 1)
    assert BehaviorPolicy(policy, 0).sampler() == (policy, 0)
    model, version = BehaviorPolicy(policy, 0, dtype=torch.bfloat16).sampler()
    assert model is not policy and version == 0 and model.weight.dtype == torch.bfloat16
    assert torch.allclose(model.weight.float(), policy.weight, atol=1e-2)


def _train(run_dir, *extra, ws_cache, subprocess_env=None):
    args = [*COMMON, f"run_dir={run_dir}", f"warmstart.cache_dir={ws_cache}", *extra]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1"}
    for key in (KILL_AFTER_UPDATE_ENV, KILL_SAMPLER_ENV):
        env.pop(key, None)
    if subprocess_env is None:
        return run_entry("experiments.train", args, cwd=ROOT, env=env)
    return subprocess.run([sys.executable, "-m", "experiments.train", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**env, **subprocess_env})


def _lines(run_dir):
    rows = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not wall_clock(k)} for r in rows]


@pytest.mark.slow
def test_async_equals_the_simulated_lag_and_survives_kills_of_either_process(tmp_path, shared_warmstart_cache):
    ws = str(shared_warmstart_cache)
    proc = _train(tmp_path / "sync", ws_cache=ws)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reference = _lines(tmp_path / "sync")
    # batch u trains at update u + 1 (the line's "update"): lag = u - max(0, u - 2) = 0, 1, 2, 2, 2
    assert [r["off_policy/staleness_max"] for r in reference] == [0, 1, 2, 2, 2]
    assert [r["sampler_version"] for r in reference] == [0, 0, 0, 1, 2]

    # the async run: uninterrupted until the sampler is killed, then the trainer, each time rerun
    killed = tmp_path / "killed"
    proc = _train(killed, "rollout.mode=async", ws_cache=ws, subprocess_env={KILL_SAMPLER_ENV: "3"})
    assert proc.returncode != 0 and "the sampler process ended (exit code -9) before batch 3" in proc.stderr
    assert _lines(killed) == reference[:3]  # updates 1-3 trained on batches 0-2; batch 3 died with the sampler
    raw = json.loads((killed / "metrics.jsonl").read_text().splitlines()[0])
    assert raw["async/trainer_wait_seconds"] >= 0 and raw["async/sampler_wait_seconds"] >= 0
    proc = _train(killed, "rollout.mode=async", ws_cache=ws, subprocess_env={KILL_AFTER_UPDATE_ENV: "4"})
    assert proc.returncode == -9 and len(_lines(killed)) == 4  # the trainer killed before update 4's checkpoint
    proc = _train(killed, "rollout.mode=async", ws_cache=ws, subprocess_env={})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _lines(killed) == reference


def test_async_config_errors_name_the_value_and_the_allowed_ones(tmp_path, shared_warmstart_cache):
    ws = str(shared_warmstart_cache)
    for extra, message in (
        (["rollout.mode=parallel"], "config error: rollout.mode='parallel' is not a valid choice; allowed: sync, async"),
        (["rollout.mode=async", "rollout.staleness=0"],
         "config error: rollout.staleness=0 is invalid with rollout.mode=async; allowed: >= 1"),
        (["rollout.sampler_dtype=float16"],
         "config error: rollout.sampler_dtype='float16' is not a valid choice; allowed: float32, bfloat16"),
    ):
        proc = _train(tmp_path / "bad", *extra, ws_cache=ws)
        assert proc.returncode == 2 and proc.stderr.strip().startswith(message), proc.stderr
        assert not (tmp_path / "bad").exists()
