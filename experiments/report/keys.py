"""The run-directory contract the report reads (docs/interfaces.md): required summary, metric,
critic and config keys, the table columns, and the error raised when a run breaks the contract."""

from __future__ import annotations

from algos.registry import trainers_with
from experiments.runfiles.axes import COMPUTE_AXES

#: Keys ``experiments/train.py`` writes to ``summary.json`` (final eval + compute totals + start model).
SUMMARY_KEYS: dict[str, str] = {
    "eval/success": "verified success rate on held-out (unseen) task templates, final policy",
    "eval/recovery_rate": "among eval episodes hit by an injected tool failure (timeout/flaky/crash), the fraction that still succeeded",
    "eval/hack_rate": "fraction of eval episodes whose training reward the verifier does not confirm (reward > 0, verified 0)",
    "eval/mean_turns": "mean number of turns (tool calls) per eval episode",
    "compute/rollouts": "complete training rollouts (episodes) generated",
    "compute/generated_tokens": "policy-sampled tokens during training rollouts",
    "compute/observation_tokens": "environment-written tokens the policy read during training rollouts",
    "compute/tool_seconds": "simulated tool seconds spent during training rollouts",
    "compute/train_flops": "estimated FLOPs of all training forward/backward passes (policy and critic)",
    "compute/wall_seconds": "wall-clock seconds of training updates (rollout collection + update; evaluation excluded)",
    "start_model/path": "checkpoint both methods started from (must be the same for a fair comparison)",
    "start_model/success": "held-out success of the start model at the same test budget",
}

#: Compute counters used as x-axes of the success curves (cumulative, in every metrics line).
CURVE_AXES: tuple[str, ...] = (
    "compute/rollouts",
    "compute/generated_tokens",
    "compute/tool_seconds",
    "compute/train_flops",
)

#: The compute axes of the report's Conclusion (cumulative, in every metrics line): the difference
#: in held-out success at the matched budget of each (experiments/report/conclusion.py).
CONCLUSION_AXES: dict[str, str] = {
    "compute/rollouts": "complete rollouts",
    "compute/generated_tokens": "generated tokens",
    "compute/train_flops": "train FLOPs",
    "compute/wall_seconds": "wall seconds",
}

#: Metrics that must appear in at least one metrics.jsonl line of every run.
METRIC_KEYS: dict[str, str] = {
    "eval/success": "held-out success (evaluation updates only)",
    "rollout/success_rate": "verified success rate of this update's training rollouts (the p of P_mix)",
    "rollout/mixed_group_rate": "fraction of groups with both a success and a failure",
    "rollout/all_zero_rate": "fraction of groups where every member failed",
    "rollout/all_one_rate": "fraction of groups where every member succeeded",
    "train/agg_weight_shift": "total-variation distance between token-mean and task-mean per-task loss weights on this batch",
}

#: Optional per-family keys of a task mixture (``algos.rollout.family_success``): the final
#: policy's held-out success on family ``<name>`` (summary and evaluation lines) and the start
#: model's (summary), each followed by the family's name.
FAMILY_EVAL_PREFIX = "eval/family_success/"
FAMILY_START_PREFIX = "start_model/family_success/"

#: Method-specific metrics: required for methods with a critic, "n/a" otherwise.
CRITIC_KEYS: dict[str, str] = {
    "critic/heldout_points": "number of (action position, complete return) pairs the held-out explained variance used",
}
#: Critic explained variance on complete returns of episodes the critic was not fitted on
#: (values predicted before this update's fit). Absent in an update with fewer than 2 held-out
#: points (no episode *terminated*), null when the held-out returns have zero variance (e.g. all 0);
#: the key must be present in every update with >= 2 held-out points.
CRITIC_EV_KEY = "critic/explained_variance_heldout"
EV_NA = "n/a (undefined in every update: < 2 held-out complete returns, or they all were equal)"
METHODS_WITH_CRITIC: frozenset[str] = frozenset(trainers_with(critic=True, agents=1))

STOP_PREFIX = "rollout/stop/"

#: Keys of the resolved config.yaml the report reads.
REQUIRED_CONFIG_KEYS: tuple[str, ...] = (
    "seed",
    "env.name",
    "algo.name",
    "algo.group_size",  # G of P_mix (1 for PPO: P_mix = 0)
    "eval.tasks",  # held-out task instances evaluated
    "eval.samples_per_task",  # test-time sampling budget (attempts per task)
    "budget.kind",  # the compute axis the runs are matched on (rollouts, generated_tokens, ...)
    "budget.amount",
)

#: Columns of the final table (one row per env x method); values are "mean ± CI" strings.
TABLE_COLUMNS: tuple[str, ...] = (
    "env",
    "method",
    "seeds",
    "test budget",
    "held-out success",
    "start-model success",
    "rollouts",
    "generated tokens",
    "observation tokens",
    "tool seconds",
    "train FLOPs",
    "wall seconds",
    "recovery after tool failure",
    "hack rate",
    "mean turns",
)
TABLE_SUMMARY_KEYS = (
    "eval/success",
    "start_model/success",
    *COMPUTE_AXES,  # rollouts, generated / observation tokens, tool seconds, train FLOPs, wall seconds
    "eval/recovery_rate",
    "eval/hack_rate",
    "eval/mean_turns",
)

#: The files that make a directory a run directory.
RUN_FILES = ("metrics.jsonl", "config.yaml", "summary.json")


class ReportError(ValueError):
    """A run directory does not follow the contract (names the key and the run)."""
