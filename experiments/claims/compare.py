"""Comparison measurements: a compute-matched GRPO vs PPO pair of real training runs (C19) and the
training-side / task-side diagnostics those runs log (C20)."""

from __future__ import annotations

import math
from functools import lru_cache

from experiments.claims.common import start_model_info, train_run

C19_BUDGET = 256  # complete training rollouts per method (budget.kind=rollouts)
C19_ALGOS = {
    "grpo": {"group_size": 4, "tasks_per_update": 4, "lr": 1e-3},
    "ppo": {"group_size": 1, "tasks_per_update": 16, "epochs": 2, "minibatches": 2, "lr": 1e-3},
}
# Items both runs must share (the fixed protocol): task set and verifier (env), start model,
# tool permissions (env kwargs), test-time sampling budget (eval), sampling, budget, seed.
PROTOCOL_ITEMS = (
    "env.name", "env.kwargs", "env.train_tasks", "compression", "policy.d_model", "policy.n_layers",
    "policy.n_heads", "policy.max_len", "policy.init_checkpoint", "policy.init_seed", "warmstart",
    "eval.split", "eval.tasks", "eval.samples_per_task", "eval.temperature", "eval.env_kwargs",
    "rollout.temperature", "rollout.max_action_tokens", "budget.kind", "budget.amount", "seed",
)
COMPUTE_AXES = ("compute/rollouts", "compute/generated_tokens", "compute/tool_seconds", "compute/train_flops",
                "compute/wall_seconds")
C19_SUMMARY_KEYS = ("eval/success", "eval_train/success", "eval/test_budget", "eval/tasks", "updates",
                    "start_model/success", *COMPUTE_AXES)
C20_GRPO_KEYS = ("rollout/all_zero_rate", "rollout/all_one_rate", "train/agg_weight_shift")
C20_PPO_KEYS = ("critic/heldout_points", "train/agg_weight_shift")
C20_TASK_KEYS = ("eval/success", "eval/test_budget", "eval/recovery_rate", "eval/tool_failure_episodes",
                 "eval_train/success", "eval_train/recovery_rate", "eval_train/tool_failure_episodes")
C20_MEAN_KEYS = ("rollout/all_zero_rate", "rollout/all_one_rate", "rollout/mixed_group_rate",
                 "train/agg_weight_shift", "critic/explained_variance_in_batch")


@lru_cache(maxsize=2)
def compare_runs(budget: int = C19_BUDGET) -> dict:
    """The compute-matched GRPO (G=4) vs PPO (G=1) pair from the same warm start (cached):
    ``{"grpo": run, "ppo": run}`` as returned by ``train_run``."""
    start_model_info()
    return {name: train_run(name, fields, budget) for name, fields in C19_ALGOS.items()}


def _item(config: dict, dotted: str):
    value = config
    for part in dotted.split("."):
        value = value[part]
    return value


def finite(x) -> bool:
    """A real, finite number (not a bool, not None, not NaN)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def measure_c19(budget: int = C19_BUDGET) -> dict:
    """What the two real runs of :func:`compare_runs` report side by side.

    Two ``experiments.runtime.loop.run`` runs (in-process, logger none) from the same cached warm start:
    GRPO G=4 x 4 tasks per update and PPO G=1 x 16 tasks, both ``budget`` rollouts, same seed, 8
    easy-BugFix train tasks, held-out evaluation 8 tasks x 4 samples. Returns ``budget``, per run
    (``grpo`` / ``ppo``) the :data:`C19_SUMMARY_KEYS` values of summary.json (None when missing),
    ``group_size`` and ``critic``; ``protocol_items`` (how many of :data:`PROTOCOL_ITEMS`),
    ``protocol_differ`` (those whose config values differ) and ``same_start`` (same start model
    file)."""
    runs = compare_runs(budget)
    out: dict = {"budget": budget}
    for name, run in runs.items():
        s = run["summary"]
        out[name] = {**{k: s.get(k) for k in C19_SUMMARY_KEYS}, "group_size": run["config"]["algo"]["group_size"],
                     "critic": s.get("critic")}
    g, p = runs["grpo"], runs["ppo"]
    out["protocol_items"] = len(PROTOCOL_ITEMS)
    out["protocol_differ"] = [k for k in PROTOCOL_ITEMS if _item(g["config"], k) != _item(p["config"], k)]
    out["same_start"] = g["summary"]["start_model/path"] == p["summary"]["start_model/path"]
    return out


def measure_c20(budget: int = C19_BUDGET) -> dict:
    """Diagnostics logged by the runs of :func:`measure_c19` (the same two runs).

    Per run (``grpo`` / ``ppo``): ``updates``; ``finite_updates`` = for each training key of its
    list (:data:`C20_GRPO_KEYS` / :data:`C20_PPO_KEYS`) the number of metrics.jsonl updates where it
    is finite; ``means`` = the mean over updates of :data:`C20_MEAN_KEYS` where finite (None when
    never); ``summary`` = :data:`C20_TASK_KEYS` from summary.json; ``eval_split``. For PPO also
    ``heldout_ev`` and ``heldout_points``: per update the critic's explained variance on held-out
    complete returns and its point count (None when absent)."""
    runs = compare_runs(budget)
    out: dict = {"budget": budget}
    for name, keys in (("grpo", C20_GRPO_KEYS), ("ppo", C20_PPO_KEYS)):
        rows, summary = runs[name]["metrics"], runs[name]["summary"]
        means = {}
        for k in C20_MEAN_KEYS:
            vals = [row[k] for row in rows if finite(row.get(k))]
            means[k] = sum(vals) / len(vals) if vals else None
        out[name] = {"updates": len(rows),
                     "finite_updates": {k: sum(finite(row.get(k)) for row in rows) for k in keys},
                     "means": means, "summary": {k: summary.get(k) for k in C20_TASK_KEYS},
                     "eval_split": runs[name]["config"]["eval"]["split"]}
    ppo_rows = runs["ppo"]["metrics"]
    out["ppo"]["heldout_ev"] = [row.get("critic/explained_variance_heldout") for row in ppo_rows]
    out["ppo"]["heldout_points"] = [row.get("critic/heldout_points") for row in ppo_rows]
    return out
