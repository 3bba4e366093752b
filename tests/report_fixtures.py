"""Fixture run directories for the report tests that follow docs/interfaces.md exactly (shared by
tests/experiments/test_report*.py; imported by name, pytest's pythonpath holds tests/).

The numbers are hand-chosen so table values and interval arithmetic can be checked by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from experiments.report.keys import METHODS_WITH_CRITIC

# Final held-out success per seed (summary.json "eval/success").
FINAL_SUCCESS = {"grpo": [0.5, 0.6, 0.7], "ppo": [0.4, 0.4, 0.7]}
SEEDS = [0, 1, 2]
UPDATES = 4
GROUP_SIZE = 4
EPISODES_PER_UPDATE = 8  # 2 groups of 4


def _metrics_lines(algo: str, seed: int, final: float | None = None) -> list[dict]:
    """UPDATES contract lines: cumulative compute counters, rollout/train/critic/eval namespaces."""
    final = FINAL_SUCCESS[algo][seed] if final is None else final
    lines = []
    for u in range(1, UPDATES + 1):
        p = 0.25 * u / UPDATES + 0.1 * seed  # measured training success of this update
        line = {
            "update": u,
            "algo": algo,
            "compute/rollouts": EPISODES_PER_UPDATE * u,
            "compute/generated_tokens": 100 * u,
            "compute/observation_tokens": 300 * u,
            "compute/tool_seconds": 2.5 * u,
            "compute/train_flops": 1e9 * u,
            "compute/wall_seconds": 0.5 * u,
            "rollout/success_rate": p,
            "rollout/mixed_group_rate": 0.5,
            "rollout/all_zero_rate": 0.5 if u < 3 else 0.0,
            "rollout/all_one_rate": 0.0 if u < 3 else 0.5,
            # Per-update episode counts by stop reason (8 episodes per update).
            "rollout/stop/submitted_resolved": 2,
            "rollout/stop/submitted_failed": 5,
            "rollout/stop/max_turns": 1,
            "train/loss": 0.1,
            "train/agg_weight_shift": 0.1 * u,
            "train/signed_adv_mass": -0.1 * u - 0.1 * seed,  # seed 0: -0.25 mean over u = 1..4
        }
        if u % 2 == 0:  # eval every 2 updates; the last one is the final eval
            line["eval/success"] = final if u == UPDATES else final / 2
        if algo in METHODS_WITH_CRITIC:  # ppo, ppo_long, ppo_segment_terminal, ...
            line["critic/explained_variance_heldout"] = 0.2 * u
            line["critic/heldout_points"] = 10
            line["critic/value_loss"] = 0.3
        lines.append(line)
    return lines


def _summary(algo: str, seed: int, final: float | None = None) -> dict:
    return {
        "eval/success": FINAL_SUCCESS[algo][seed] if final is None else final,
        "eval/recovery_rate": 0.25 * (seed + 1),  # 0.25, 0.5, 0.75
        "eval/hack_rate": 0.0,
        "eval/mean_turns": 5.0 + seed,  # 5, 6, 7
        "compute/rollouts": EPISODES_PER_UPDATE * UPDATES,
        "compute/generated_tokens": 100 * UPDATES,
        "compute/observation_tokens": 300 * UPDATES,
        "compute/tool_seconds": 2.5 * UPDATES,
        "compute/train_flops": 1e9 * UPDATES,
        "compute/wall_seconds": 0.5 * UPDATES,
        "start_model/path": "checkpoints/start.pt",
        "start_model/success": 0.2,
    }


def write_run(run_dir: Path, algo: str, env: str, seed: int, drop_metric: str | None = None,
              drop_summary: str | None = None, final: float | None = None, group_size: int = GROUP_SIZE,
              eval_tasks: int = 16) -> Path:
    """One run directory; ``final`` overrides FINAL_SUCCESS (the last eval is ``final``, the one at
    update 2 is ``final / 2``)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {
        "seed": seed,
        "env": {"name": env, "id": {"bugfix": "agentrl/BugFix-v2", "long_horizon": "agentrl/LongHorizon-v1"}.get(env, env)},
        "algo": {"name": algo, "group_size": group_size},
        "budget": {"kind": "rollouts", "amount": EPISODES_PER_UPDATE * UPDATES},
        "eval": {"tasks": eval_tasks, "samples_per_task": 2},
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    with open(run_dir / "metrics.jsonl", "w") as f:
        for line in _metrics_lines(algo, seed, final):
            line.pop(drop_metric, None)
            f.write(json.dumps(line) + "\n")
    summary = _summary(algo, seed, final)
    summary.pop(drop_summary, None)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def make_sweep(root: Path, envs=("bugfix",)) -> Path:
    # Hydra multirun layout: <sweep>/<job number>/ ; nest one level deeper for one env to check
    # the recursive search.
    n = 0
    for env in envs:
        for algo in ("grpo", "ppo"):
            for seed in SEEDS:
                write_run(root / env / str(n), algo, env, seed)
                n += 1
    (root / "not_a_run").mkdir()
    (root / "not_a_run" / "metrics.jsonl").write_text("")  # no config/summary -> ignored
    return root
