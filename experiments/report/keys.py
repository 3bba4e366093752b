"""The run-directory contract the report reads (docs/interfaces.md): which keys of the metric
contract (``algos/metric_keys.py``, where each key's unit and meaning live) are required, the
required config keys, the table columns, and the error raised when a run breaks the contract."""

from __future__ import annotations

from algos import metric_keys as mk
from algos.registry import trainers_with
from experiments.runfiles.axes import COMPUTE_AXES

#: Keys ``experiments/train.py`` writes to ``summary.json`` (final eval + compute totals + start model).
SUMMARY_KEYS: tuple[str, ...] = (
    mk.EVAL_SUCCESS, mk.EVAL_RECOVERY_RATE, mk.EVAL_HACK_RATE, mk.EVAL_MEAN_TURNS, *COMPUTE_AXES,
    mk.START_MODEL_PATH, mk.START_MODEL_SUCCESS,
)

#: Compute counters used as x-axes of the success curves (cumulative, in every metrics line).
CURVE_AXES: tuple[str, ...] = (
    mk.COMPUTE_ROLLOUTS,
    mk.COMPUTE_GENERATED_TOKENS,
    mk.COMPUTE_TOOL_SECONDS,
    mk.COMPUTE_TRAIN_FLOPS,
)

#: The compute axes of the report's Conclusion (cumulative, in every metrics line): the difference
#: in held-out success at the matched budget of each (experiments/report/conclusion.py).
CONCLUSION_AXES: dict[str, str] = {
    mk.COMPUTE_ROLLOUTS: "complete rollouts",
    mk.COMPUTE_GENERATED_TOKENS: "generated tokens",
    mk.COMPUTE_TRAIN_FLOPS: "train FLOPs",
    mk.COMPUTE_WALL_SECONDS: "wall seconds",
}

#: Metrics that must appear in at least one metrics.jsonl line of every run.
METRIC_KEYS: tuple[str, ...] = (
    mk.EVAL_SUCCESS, mk.ROLLOUT_SUCCESS_RATE, mk.ROLLOUT_MIXED_GROUP_RATE, mk.ROLLOUT_ALL_ZERO_RATE,
    mk.ROLLOUT_ALL_ONE_RATE, mk.TRAIN_AGG_WEIGHT_SHIFT,
)

#: Optional per-family keys of a task mixture (``algos.evaluation.family_success``): the final
#: policy's held-out success on family ``<name>`` (summary and evaluation lines) and the start
#: model's (summary), each followed by the family's name.
FAMILY_EVAL_PREFIX = mk.prefix(mk.EVAL_FAMILY_SUCCESS)
FAMILY_START_PREFIX = mk.prefix(mk.START_MODEL_FAMILY_SUCCESS)

#: Method-specific metrics: required for methods with a critic, "n/a" otherwise.
CRITIC_KEYS: tuple[str, ...] = (mk.CRITIC_HELDOUT_POINTS,)
#: Critic explained variance on complete returns of episodes the critic was not fitted on
#: (values predicted before this update's fit). Absent in an update with fewer than 2 held-out
#: points (no episode *terminated*), null when the held-out returns have zero variance (e.g. all 0);
#: the key must be present in every update with >= 2 held-out points.
CRITIC_EV_KEY = mk.CRITIC_EXPLAINED_VARIANCE_HELDOUT
EV_NA = "n/a (undefined in every update: < 2 held-out complete returns, or they all were equal)"
METHODS_WITH_CRITIC: frozenset[str] = frozenset(trainers_with(critic=True, agents=1))

STOP_PREFIX = mk.prefix(mk.ROLLOUT_STOP)

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
    mk.EVAL_SUCCESS,
    mk.START_MODEL_SUCCESS,
    *COMPUTE_AXES,  # rollouts, generated / observation tokens, tool seconds, train FLOPs, wall seconds
    mk.EVAL_RECOVERY_RATE,
    mk.EVAL_HACK_RATE,
    mk.EVAL_MEAN_TURNS,
)

#: The files that make a directory a run directory.
RUN_FILES = ("metrics.jsonl", "config.yaml", "summary.json")
#: A run record (``python -m experiments.report.archive``): a run directory's metrics gzipped, read
#: in place of ``metrics.jsonl`` where a directory has no ``metrics.jsonl``.
ARCHIVED_METRICS = "metrics.jsonl.gz"


class ReportError(ValueError):
    """A run directory does not follow the contract (names the key and the run)."""
