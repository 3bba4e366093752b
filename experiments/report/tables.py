"""The report's numbers: per-env x method rows of the final and diagnostics tables (mean ± CI over
seeds), stop-reason totals, the measured mixed-group rate next to P_mix, and what makes a
comparison not compute-matched."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from algos import metric_keys as mk
from algos.metrics import mixed_group_probability
from algos.registry import trainer_traits
from envs.stop import StopReason
from experiments.report.keys import CRITIC_EV_KEY, EV_NA, METHODS_WITH_CRITIC, STOP_PREFIX, TABLE_SUMMARY_KEYS
from experiments.report.load import Run, config_get
from experiments.report.pair import PAIR_AGENTS, PAIR_METHODS, PAIR_NA, PAIR_NA_SUMMARY_KEYS, agent_key, critic_ev_key
from experiments.report.stats import fmt_seeds


def stop_reason_totals(runs: Sequence[Run]) -> dict[str, float]:
    """Sum of ``rollout/stop/<reason>`` over every update of every run (reason -> count)."""
    totals: dict[str, float] = {}
    for run in runs:
        for row in run.metrics:
            for k, v in row.items():
                if k.startswith(STOP_PREFIX) and v is not None:
                    reason = k[len(STOP_PREFIX):]
                    totals[reason] = totals.get(reason, 0.0) + float(v)
    return totals


def p_mix_series(run: Run) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, measured mixed-group rate, P_mix(p_t, G)) over the updates that hold both
    ``rollout/mixed_group_rate`` and a finite ``rollout/success_rate`` p_t (an update whose
    episodes were all masked has no p); G = ``algo.group_size`` of the run's config."""
    g = int(config_get(run.config, "algo.group_size"))
    xs, measured, predicted = [], [], []
    for row in run.metrics:
        p, m = row.get(mk.ROLLOUT_SUCCESS_RATE), row.get(mk.ROLLOUT_MIXED_GROUP_RATE)
        if p is None or m is None or not math.isfinite(float(p)) or not math.isfinite(float(m)):
            continue
        xs.append(float(row[mk.COMPUTE_ROLLOUTS]))
        measured.append(float(m))
        predicted.append(mixed_group_probability(float(p), g))
    return np.array(xs), np.array(measured), np.array(predicted)


def test_budget(run: Run) -> str:
    """``"<tasks> tasks x <k> samples"``: the held-out evaluation's test-time sampling budget."""
    return f"{config_get(run.config, 'eval.tasks')} tasks x {config_get(run.config, 'eval.samples_per_task')} samples"


def summary_values(runs: Sequence[Run], key: str) -> list[Any]:
    return [r.summary[key] for r in runs]


def final_table(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> list[list[Any]]:
    """One row of ``TABLE_COLUMNS`` per env x method (mean ± CI over seeds); a two-agent method's
    cells of ``PAIR_NA_SUMMARY_KEYS`` read ``PAIR_NA`` (experiments/report/pair.py)."""
    rows = []
    for env, methods in groups.items():
        for method, runs in methods.items():
            budgets = sorted({test_budget(r) for r in runs})
            row: list[Any] = [env, method, len(runs), ", ".join(budgets)]
            row += [PAIR_NA if method in PAIR_METHODS and k in PAIR_NA_SUMMARY_KEYS
                    else fmt_seeds(summary_values(runs, k)) for k in TABLE_SUMMARY_KEYS]
            rows.append(row)
    return rows


#: update knobs every method of a comparison must share (``PROTOCOL_KEYS[key]`` names it in a
#: warning): the loss aggregation moved GRPO's held-out success by +0.09 on the main job (README
#: "The main job"), so a report over runs that weigh trajectories differently compares conventions,
#: not estimators. Runs whose config lacks a key (older runs) are left out of that key's check.
PROTOCOL_KEYS = {"algo.loss_agg": "loss aggregations", "algo.lr": "learning rates"}


def _protocol_warnings(env: str, runs: Sequence[Run]) -> list[str]:
    """One line per :data:`PROTOCOL_KEYS` entry whose value differs across ``runs``, listing each
    value with the methods that used it, e.g. ``bugfix: loss aggregations differ across runs
    (task-mean: grpo; token-mean: ppo)``."""
    out = []
    for key, what in PROTOCOL_KEYS.items():
        methods_of: dict[str, set[str]] = {}
        for r in runs:
            try:
                value = config_get(r.config, key)
            except KeyError:
                continue
            methods_of.setdefault(str(value), set()).add(r.algo)
        if len(methods_of) > 1:
            parts = "; ".join(f"{v}: {', '.join(sorted(m))}" for v, m in sorted(methods_of.items()))
            out.append(f"{env}: {what} differ across runs ({parts})")
    return out


def fairness_warnings(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> list[str]:
    """What differs across runs that C19 says must be fixed: test budget, training budget (kind
    and amount), start model, the shared update knobs of :data:`PROTOCOL_KEYS`; and whether the
    methods ran the same seeds."""
    out = []
    for env, methods in groups.items():
        all_runs = [r for runs in methods.values() for r in runs]
        budgets = {test_budget(r) for r in all_runs}
        if len(budgets) > 1:
            out.append(f"{env}: test budgets differ across runs ({', '.join(sorted(budgets))})")
        budgets = {f"{config_get(r.config, 'budget.kind')}={config_get(r.config, 'budget.amount')}" for r in all_runs}
        if len(budgets) > 1:
            out.append(f"{env}: training budgets differ across runs ({', '.join(sorted(budgets))})")
        starts = {str(r.summary[mk.START_MODEL_PATH]) for r in all_runs}
        if len(starts) > 1:
            out.append(f"{env}: start models differ across runs ({', '.join(sorted(starts))})")
        out += _protocol_warnings(env, all_runs)
        seeds = {m: tuple(r.seed for r in runs) for m, runs in methods.items()}
        if len(set(seeds.values())) > 1:
            out.append(f"{env}: methods ran different seeds ({seeds})")
    return out


# ---------------------------------------------------------------------------------------------


def ordered_reasons(totals: Mapping[str, Mapping[str, float]]) -> list[str]:
    """Reasons present in ``totals`` in ``envs.stop.StopReason`` order, unknown ones after (sorted)."""
    present = {r for t in totals.values() for r in t}
    known = [r.value for r in StopReason if r.value in present]
    return known + sorted(present - set(known))


def per_run_mean(run: Run, key: str) -> float:
    """Mean of ``key`` over the run's updates that logged it (NaN when none did)."""
    _, y = run.series(key)
    return float(np.mean(y)) if y.size else float("nan")


def pmix_gap(run: Run) -> float:
    """Mean over updates of |measured mixed-group rate - P_mix(measured success rate, G)|."""
    _, measured, predicted = p_mix_series(run)
    return float(np.mean(np.abs(measured - predicted))) if measured.size else float("nan")


def second_half_mean(run: Run, key: str) -> float:
    """Mean of ``key`` over the updates of the second half of training (``update > U / 2``, U the
    run's last update), defined values only; NaN when none is defined there."""
    last = max(int(r["update"]) for r in run.metrics)
    ys = [float(r[key]) for r in run.metrics
          if int(r["update"]) > last / 2 and r.get(key) is not None and math.isfinite(float(r[key]))]
    return float(np.mean(ys)) if ys else float("nan")


G1_NA = "n/a (G = 1)"


def _update_mean_cell(method: str, runs: Sequence[Run], key: str, missing: str | None = None) -> str:
    """Mean over updates of the train metric ``key`` per seed, as ``mean ± half-width`` over seeds;
    per agent (``a: ... / b: ...``, keys ``agent_X/<key>``) for the two-agent methods. ``missing``:
    the cell when no run logged the key (None: format whatever there is)."""
    keys = [(f"{a}: ", agent_key(a, key)) for a in PAIR_AGENTS] if method in PAIR_METHODS else [("", key)]
    if missing is not None and not any(r.has(k) for _, k in keys for r in runs):
        return missing
    return " / ".join(f"{label}{fmt_seeds([per_run_mean(r, k) for r in runs])}" for label, k in keys)


DIAG_COLUMNS = (
    "env",
    "method",
    "G",
    "mixed-group rate (mean over updates)",
    "measured minus P_mix, abs (mean over updates)",
    "all-0 groups",
    "all-1 groups",
    "critic EV held-out (2nd-half mean)",
    "critic EV held-out per seed (2nd-half mean)",
    "agg weight shift (mean)",
    "signed advantage mass (mean)",
    "anchor hit rate (mean)",
    "critic warm-up rollouts (share of rollouts)",
)
#: runs whose metrics.jsonl has no ``train/signed_adv_mass`` (written by a trainer that does not log it)
MASS_NA = "n/a (not logged)"
#: GiGPO's share of steps whose anchor state recurs in its group (``algos/gigpo.py``); other
#: methods do not log it.
ANCHOR_KEY = mk.TRAIN_ANCHOR_HIT_RATE
ANCHOR_NA = "n/a (no step groups)"
#: rollouts collected for critic-only warm-up updates (``algo.value_warmup_updates``), inside the budget
WARMUP_KEY = mk.COMPUTE_WARMUP_ROLLOUTS
WARMUP_NA = "n/a (not logged)"


def warmup_cell(runs: Sequence[Run]) -> str:
    """Mean warm-up rollouts over ``runs`` and their mean share of each run's complete rollouts,
    e.g. ``128 (6.2 %)``; :data:`WARMUP_NA` when a run's summary lacks :data:`WARMUP_KEY`."""
    if not runs or any(WARMUP_KEY not in r.summary for r in runs):
        return WARMUP_NA
    counts = [float(r.summary[WARMUP_KEY]) for r in runs]
    shares = [c / float(r.summary[mk.COMPUTE_ROLLOUTS]) if r.summary.get(mk.COMPUTE_ROLLOUTS) else 0.0
              for c, r in zip(counts, runs)]
    return f"{sum(counts) / len(counts):.0f} ({100 * sum(shares) / len(shares):.1f} %)"


def _per_seed(values: Sequence[float]) -> str:
    return ", ".join("n/a" if not math.isfinite(v) else f"{v:.3f}" for v in values)


def diagnostics_table(groups: Mapping[str, Mapping[str, Sequence[Run]]]) -> list[list[Any]]:
    """One row per env x method. Group columns only for runs with G > 1 (with G = 1 every group is
    all-0 or all-1 by definition and none is mixed: ``n/a (G = 1)``); the critic's held-out
    explained variance per seed is its mean over the second half of training
    (:func:`second_half_mean`), then mean ± CI over seeds. The anchor hit rate (GiGPO) is the
    mean over updates per seed, then mean ± CI; ``n/a (no step groups)`` for methods that never
    log :data:`ANCHOR_KEY`. A two-agent method (``experiments.report.pair.PAIR_METHODS``, G = 1)
    gives its critic, weight-shift and advantage-mass cells per agent, ``a: <a's> / b: <b's>`` (its
    ``agent_X/critic/explained_variance_heldout``, ``agent_X/train/agg_weight_shift`` and
    ``agent_X/train/signed_adv_mass``)."""
    rows = []
    for env, methods in groups.items():
        for method, runs in methods.items():
            gs = sorted({int(config_get(r.config, "algo.group_size")) for r in runs})
            grouped = [r for r in runs if int(config_get(r.config, "algo.group_size")) > 1]
            if method in PAIR_METHODS:
                evs = {a: [second_half_mean(r, critic_ev_key(a)) for r in runs] for a in PAIR_AGENTS}
                ev = " / ".join(f"{a}: {fmt_seeds(v) if fmt_seeds(v) != 'n/a' else 'n/a'}" for a, v in evs.items())
                ev_seeds = " / ".join(f"{a}: {_per_seed(v)}" for a, v in evs.items())
            elif method in METHODS_WITH_CRITIC:
                per_seed = [second_half_mean(r, CRITIC_EV_KEY) for r in runs]
                ev = fmt_seeds(per_seed)
                ev_seeds = _per_seed(per_seed)
                if ev == "n/a":
                    ev, ev_seeds = EV_NA, "n/a"
            else:
                ev, ev_seeds = f"n/a ({method.upper()} has no critic)", "n/a"
            if grouped:
                group_cells = [
                    fmt_seeds([per_run_mean(r, mk.ROLLOUT_MIXED_GROUP_RATE) for r in grouped]),
                    fmt_seeds([pmix_gap(r) for r in grouped]),
                    fmt_seeds([per_run_mean(r, mk.ROLLOUT_ALL_ZERO_RATE) for r in grouped]),
                    fmt_seeds([per_run_mean(r, mk.ROLLOUT_ALL_ONE_RATE) for r in grouped]),
                ]
            else:
                group_cells = [G1_NA] * 4
            anchors = (fmt_seeds([per_run_mean(r, ANCHOR_KEY) for r in runs])
                       if any(r.has(ANCHOR_KEY) for r in runs) else ANCHOR_NA)
            shift = _update_mean_cell(method, runs, mk.TRAIN_AGG_WEIGHT_SHIFT)
            mass = _update_mean_cell(method, runs, mk.TRAIN_SIGNED_ADV_MASS, missing=MASS_NA)
            rows.append([env, method, ", ".join(map(str, gs)), *group_cells, ev, ev_seeds, shift, mass, anchors,
                         warmup_cell(runs)])
    return rows


AGENT_COLUMNS: tuple[str, ...] = (
    "env",
    "method",
    "agent",
    "held-out success, bug only in this agent's file",
    "start model, same tasks",
    "own file fixed (held-out)",
    "messages sent per episode",
    "format error rate",
    "critic",
    "critic EV held-out (2nd-half mean)",
    "critic EV held-out per seed",
)


def _summary(run, key: str) -> Any:
    v = run.summary.get(key)
    return None if v is None or not math.isfinite(float(v)) else float(v)


def agent_table(groups: Mapping[str, Mapping[str, Sequence[Any]]]) -> list[list[Any]]:
    """One row per (env, pair method, agent) of :data:`AGENT_COLUMNS`; every cell is mean ± the
    95 % t half-width over seeds (:func:`experiments.report.stats.fmt_seeds`). Methods outside
    :data:`PAIR_METHODS` have no rows."""
    rows = []
    for env, methods in groups.items():
        for method, runs in methods.items():
            if method not in PAIR_METHODS:
                continue
            for a in PAIR_AGENTS:
                only = mk.member(mk.EVAL_SUCCESS_BUG_IN_ONLY, X=a)
                per_seed = [second_half_mean(r, critic_ev_key(a)) for r in runs]
                ev = fmt_seeds(per_seed)
                ev, ev_seeds = (EV_NA, "n/a") if ev == "n/a" else (ev, _per_seed(per_seed))
                rows.append([
                    env, method, a,
                    fmt_seeds([_summary(r, agent_key(a, only)) for r in runs]),
                    fmt_seeds([_summary(r, mk.START_MODEL + agent_key(a, only)) for r in runs]),
                    fmt_seeds([_summary(r, agent_key(a, mk.EVAL_FILE_FIXED)) for r in runs]),
                    fmt_seeds([_summary(r, agent_key(a, mk.EVAL_MESSAGES_SENT)) for r in runs]),
                    fmt_seeds([_summary(r, agent_key(a, mk.EVAL_FORMAT_ERROR_RATE)) for r in runs]),
                    "central (joint state)" if trainer_traits(method).central_critic else "local (own context)",
                    ev, ev_seeds,
                ])
    return rows
