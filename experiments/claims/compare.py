"""Comparison claims: a compute-matched GRPO vs PPO pair of real training runs (C19) and the
training-side / task-side diagnostics those runs log (C20). Each ``measure_cNN`` returns its
claim's frozen result: the measured values as fields, the row's texts and the pass rule."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from algos import metric_keys as mk
from experiments.claims.common import start_model_info, train_run
from experiments.claims.result import EMPIRICAL, ClaimResult, finite, sig

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
COMPUTE_AXES = (mk.COMPUTE_ROLLOUTS, mk.COMPUTE_GENERATED_TOKENS, mk.COMPUTE_TOOL_SECONDS, mk.COMPUTE_TRAIN_FLOPS,
                mk.COMPUTE_WALL_SECONDS)
C20_GRPO_KEYS = (mk.ROLLOUT_ALL_ZERO_RATE, mk.ROLLOUT_ALL_ONE_RATE, mk.TRAIN_AGG_WEIGHT_SHIFT)
C20_PPO_KEYS = (mk.CRITIC_HELDOUT_POINTS, mk.TRAIN_AGG_WEIGHT_SHIFT)
C20_MEAN_KEYS = (mk.ROLLOUT_ALL_ZERO_RATE, mk.ROLLOUT_ALL_ONE_RATE, mk.ROLLOUT_MIXED_GROUP_RATE,
                 mk.TRAIN_AGG_WEIGHT_SHIFT, mk.CRITIC_EXPLAINED_VARIANCE_IN_BATCH)


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


# --------------------------------------------------------------------------------------------- C19
@dataclass(frozen=True)
class ComparedRun:
    """What one run of the C19 pair reports in summary.json (None when missing): held-out and
    train-template success, the test budget (samples per task) and held-out task count, updates,
    the start model's held-out success, every compute axis (``compute``, by its summary key); and
    from its config the group size and its critic."""

    eval_success: float | None
    eval_train_success: float | None
    test_budget: int | None
    eval_tasks: int | None
    updates: int | None
    start_success: float | None
    compute: Mapping[str, float | None]
    group_size: int
    critic: str | None

    @classmethod
    def read(cls, run: dict) -> ComparedRun:
        """The values of ``run`` (as returned by ``train_run``)."""
        s = run["summary"]
        return cls(eval_success=s.get(mk.EVAL_SUCCESS), eval_train_success=s.get(mk.EVAL_TRAIN_SUCCESS),
                   test_budget=s.get(mk.EVAL_TEST_BUDGET), eval_tasks=s.get(mk.EVAL_TASKS), updates=s.get("updates"),
                   start_success=s.get(mk.START_MODEL_SUCCESS), compute={k: s.get(k) for k in COMPUTE_AXES},
                   group_size=run["config"]["algo"]["group_size"], critic=s.get("critic"))

    def complete(self) -> bool:
        """Held-out success, test budget and every compute axis are finite numbers."""
        return all(finite(v) for v in (self.eval_success, self.test_budget, *self.compute.values()))


@dataclass(frozen=True)
class C19Result(ClaimResult):
    """The GRPO and PPO runs of :func:`compare_runs` side by side (:class:`ComparedRun`), the
    rollout ``budget``, the number of ``protocol_items``, those whose config values differ
    (``protocol_differ``) and whether both started from the same model file (``same_start``)."""

    what: ClassVar[str] = "compute-matched GRPO vs PPO comparison (two experiments.train runs)"
    expected: ClassVar[str] = "rollouts, tokens, tool time, train compute side by side; fixed protocol"
    kind: ClassVar[str] = EMPIRICAL

    budget: int
    grpo: ComparedRun
    ppo: ComparedRun
    protocol_items: int
    protocol_differ: tuple[str, ...]
    same_start: bool

    def passes(self) -> bool:
        """Both runs report every required value, share the protocol, the start model and the test
        budget, and spent at least the rollout budget."""
        g, p = self.grpo, self.ppo
        return (g.complete() and p.complete() and not self.protocol_differ and self.same_start
                and g.test_budget == p.test_budget
                and g.compute[mk.COMPUTE_ROLLOUTS] >= self.budget and p.compute[mk.COMPUTE_ROLLOUTS] >= self.budget)

    @property
    def measured(self) -> str:
        g, p = self.grpo, self.ppo
        pairs = [("success (held-out templates)", g.eval_success, p.eval_success),
                 ("success (train templates)", g.eval_train_success, p.eval_train_success),
                 *((k.split("/")[-1], g.compute[k], p.compute[k]) for k in COMPUTE_AXES),
                 ("updates", g.updates, p.updates)]
        table = "; ".join(f"{label}: GRPO {sig(a)} vs PPO {sig(b)}" for label, a, b in pairs)
        differ = self.protocol_differ
        return (f"experiments.runtime.loop.run x2 from one warm start (start success {sig(g.start_success)} on "
                f"held-out), budget {self.budget} rollouts, GRPO G={g.group_size} vs PPO G={p.group_size} (critic "
                f"{p.critic}), test budget {sig(g.test_budget)} vs {sig(p.test_budget)} samples x "
                f"{sig(g.eval_tasks)} held-out tasks: {table}; protocol items equal: "
                f"{self.protocol_items - len(differ)}/{self.protocol_items}"
                + (f" (differ: {', '.join(differ)})" if differ else "") + f", same start model file: {self.same_start}")


def measure_c19(budget: int = C19_BUDGET) -> C19Result:
    """What the two real runs of :func:`compare_runs` report side by side.

    Two ``experiments.runtime.loop.run`` runs (in-process, logger none) from the same cached warm start:
    GRPO G=4 x 4 tasks per update and PPO G=1 x 16 tasks, both ``budget`` rollouts, same seed, 8
    easy-BugFix train tasks, held-out evaluation 8 tasks x 4 samples. Each run is read as a
    :class:`ComparedRun`; the protocol is compared item by item over :data:`PROTOCOL_ITEMS`."""
    runs = compare_runs(budget)
    g, p = runs["grpo"], runs["ppo"]
    return C19Result(budget=budget, grpo=ComparedRun.read(g), ppo=ComparedRun.read(p),
                     protocol_items=len(PROTOCOL_ITEMS),
                     protocol_differ=tuple(k for k in PROTOCOL_ITEMS if _item(g["config"], k) != _item(p["config"], k)),
                     same_start=g["summary"][mk.START_MODEL_PATH] == p["summary"][mk.START_MODEL_PATH])


# --------------------------------------------------------------------------------------------- C20
@dataclass(frozen=True)
class DiagnosedRun:
    """The diagnostics one run of the C19 pair logged. ``finite_updates``: for each training
    metric key of its list (:data:`C20_GRPO_KEYS` / :data:`C20_PPO_KEYS`) the number of
    metrics.jsonl updates where it is finite. Means over the updates where finite (None when
    never): all-0 / all-1 / mixed group rates, the aggregation weight shift and the critic's
    in-batch explained variance. From summary.json (None when missing): success, test budget,
    recovery rate and tool-failure episodes on held-out and (``train_*``) train templates; and the
    config's eval split."""

    updates: int
    finite_updates: Mapping[str, int]
    all_zero_rate: float | None
    all_one_rate: float | None
    mixed_group_rate: float | None
    agg_weight_shift: float | None
    ev_in_batch: float | None
    success: float | None
    test_budget: int | None
    recovery_rate: float | None
    tool_failure_episodes: int | None
    train_success: float | None
    train_recovery_rate: float | None
    train_tool_failure_episodes: int | None
    eval_split: str

    @classmethod
    def read(cls, run: dict, keys: tuple[str, ...]) -> DiagnosedRun:
        """The diagnostics of ``run`` (as returned by ``train_run``), counting ``keys``."""
        rows, s = run["metrics"], run["summary"]
        means = {}
        for k in C20_MEAN_KEYS:
            vals = [row[k] for row in rows if finite(row.get(k))]
            means[k] = sum(vals) / len(vals) if vals else None
        return cls(updates=len(rows), finite_updates={k: sum(finite(row.get(k)) for row in rows) for k in keys},
                   all_zero_rate=means[mk.ROLLOUT_ALL_ZERO_RATE], all_one_rate=means[mk.ROLLOUT_ALL_ONE_RATE],
                   mixed_group_rate=means[mk.ROLLOUT_MIXED_GROUP_RATE], agg_weight_shift=means[mk.TRAIN_AGG_WEIGHT_SHIFT],
                   ev_in_batch=means[mk.CRITIC_EXPLAINED_VARIANCE_IN_BATCH], success=s.get(mk.EVAL_SUCCESS),
                   test_budget=s.get(mk.EVAL_TEST_BUDGET), recovery_rate=s.get(mk.EVAL_RECOVERY_RATE),
                   tool_failure_episodes=s.get(mk.EVAL_TOOL_FAILURE_EPISODES),
                   train_success=s.get(mk.EVAL_TRAIN_SUCCESS), train_recovery_rate=s.get(mk.EVAL_TRAIN_RECOVERY_RATE),
                   train_tool_failure_episodes=s.get(mk.EVAL_TRAIN_TOOL_FAILURE_EPISODES),
                   eval_split=run["config"]["eval"]["split"])

    def problems(self, name: str) -> list[str]:
        """What this run (called ``name``) misses: training keys not finite in every update, task
        values not finite in the summary, an eval split that is not held-out."""
        out = [f"{name} {k}" for k, n in self.finite_updates.items() if n != self.updates]
        required = ((mk.EVAL_SUCCESS, self.success), (mk.EVAL_TEST_BUDGET, self.test_budget),
                    (mk.EVAL_RECOVERY_RATE, self.recovery_rate),
                    (mk.EVAL_TOOL_FAILURE_EPISODES, self.tool_failure_episodes),
                    (mk.EVAL_TRAIN_SUCCESS, self.train_success))
        out += [f"{name} summary {k}" for k, v in required if not finite(v)]
        if self.eval_split != "heldout":
            out.append(f"{name} eval split")
        return out


@dataclass(frozen=True)
class C20Result(ClaimResult):
    """The diagnostics of C19's runs (:class:`DiagnosedRun`) and, per PPO update, the critic's
    explained variance on held-out complete returns and its point count (None when absent)."""

    what: ClassVar[str] = "training-side and task-side diagnostics (C19's runs)"
    expected: ClassVar[str] = ("all-0/all-1 rates, held-out critic EV, slicing shift, success at equal budget, "
                               "recovery, unseen templates")
    kind: ClassVar[str] = EMPIRICAL

    budget: int
    grpo: DiagnosedRun
    ppo: DiagnosedRun
    heldout_ev: tuple[float | None, ...]
    heldout_points: tuple[int | None, ...]

    def problems(self) -> list[str]:
        """What C20 misses: each run's :meth:`DiagnosedRun.problems`, a held-out EV never finite,
        or one absent without a point count."""
        problems = self.grpo.problems("grpo") + self.ppo.problems("ppo")
        if not any(finite(v) for v in self.heldout_ev):
            problems.append("ppo critic/explained_variance_heldout never finite")
        if any(not finite(v) and not finite(n) for v, n in zip(self.heldout_ev, self.heldout_points)):
            problems.append("ppo held-out EV missing without a point count")
        return problems

    def passes(self) -> bool:
        """Nothing is missing (:meth:`problems`)."""
        return not self.problems()

    @property
    def measured(self) -> str:
        g, p = self.grpo, self.ppo
        ev, points = self.heldout_ev, self.heldout_points
        fin = [v for v in ev if finite(v)]
        nan_pts = [n for v, n in zip(ev, points) if not finite(v)]
        nan = float("nan")
        problems = self.problems()
        return (f"C19's runs, per update (mean over {g.updates} GRPO / {p.updates} PPO updates): GRPO all-0 groups "
                f"{sig(g.all_zero_rate)}, all-1 {sig(g.all_one_rate)}, mixed {sig(g.mixed_group_rate)}; agg weight "
                f"shift token- vs task-mean GRPO {sig(g.agg_weight_shift)} / PPO {sig(p.agg_weight_shift)}; PPO "
                f"critic EV on held-out complete returns finite in {len(fin)}/{len(ev)} updates (range "
                f"[{sig(min(fin, default=nan))}, {sig(max(fin, default=nan))}], last finite {sig(fin[-1] if fin else nan)}, "
                f"{sum(n for n in points if finite(n)) / max(len(points), 1):.0f} held-out points per update)"
                + (f", NaN/absent in {len(nan_pts)} with " + ", ".join(
                    f"{n} points ({'returns without variance' if finite(n) and n >= 2 else 'fewer than 2 points'})"
                    for n in nan_pts) if nan_pts else "")
                + f", in-batch EV {sig(p.ev_in_batch)}; task side (held-out templates, {sig(g.test_budget)} "
                f"samples/task): success GRPO {sig(g.success)} / PPO {sig(p.success)} (train templates "
                f"{sig(g.train_success)} / {sig(p.train_success)}), recovery after an injected tool failure (success "
                f"among those episodes) held-out {sig(g.recovery_rate)} ({sig(g.tool_failure_episodes)} episodes) / "
                f"{sig(p.recovery_rate)} ({sig(p.tool_failure_episodes)}), train templates "
                f"{sig(g.train_recovery_rate)} ({sig(g.train_tool_failure_episodes)}) / "
                f"{sig(p.train_recovery_rate)} ({sig(p.train_tool_failure_episodes)})"
                + (f"; missing or not finite: {', '.join(problems)}" if problems else ""))


def measure_c20(budget: int = C19_BUDGET) -> C20Result:
    """Diagnostics logged by the runs of :func:`measure_c19` (the same two runs), each read as a
    :class:`DiagnosedRun`; for PPO also, per update, ``critic/explained_variance_heldout`` and
    ``critic/heldout_points`` (None when absent)."""
    runs = compare_runs(budget)
    ppo_rows = runs["ppo"]["metrics"]
    return C20Result(budget=budget, grpo=DiagnosedRun.read(runs["grpo"], C20_GRPO_KEYS),
                     ppo=DiagnosedRun.read(runs["ppo"], C20_PPO_KEYS),
                     heldout_ev=tuple(row.get(mk.CRITIC_EXPLAINED_VARIANCE_HELDOUT) for row in ppo_rows),
                     heldout_points=tuple(row.get(mk.CRITIC_HELDOUT_POINTS) for row in ppo_rows))
