"""Two-agent runs (``algo=ppo_ctde | ppo_independent`` on PairFix-v2, ``experiments/train_pair.py``)
in the report: what their run directories must hold, which single-agent columns they do not have,
and the per-agent table.

A pair run writes the team's ``eval/success`` (final held-out evaluation), ``start_model/success``,
``rollout/success_rate`` (the team's training success, the name the report reads) and the
``compute/*`` counters (``compute/rollouts`` = pair episodes; tokens, tool seconds and FLOPs sum
both agents), so the Conclusion, the success curves and the compute columns read it like a
one-agent run. It has no ``eval/recovery_rate`` / ``eval/hack_rate`` / ``eval/mean_turns``
(:data:`PAIR_NA_SUMMARY_KEYS`: the final table says :data:`PAIR_NA`), no groups (G = 1), no
``rollout/stop/<reason>`` counters and no team critic: every metric of an agent's trainer is
``agent_<X>/...`` (X in :data:`PAIR_AGENTS`), and :func:`agent_table` gives one row per
(method, agent): the final held-out success on tasks whose bug is only in X's file, X's file
fixed at the end, X's messages and format errors per episode (all ``agent_X/eval/...`` of
``summary.json``; the start model's ``start_model/agent_X/eval/...`` beside the first), and X's
critic explained variance on held-out complete returns (``agent_X/critic/explained_variance_heldout``,
central for ppo_ctde, local for ppo_independent; per seed the mean over the second half of
training, as for PPO's critic).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from experiments.report.keys import EV_NA

#: Trainers of ``experiments/train_pair.py`` (``experiments.config.PAIR_ALGOS``).
PAIR_METHODS: frozenset[str] = frozenset({"ppo_ctde", "ppo_independent"})
PAIR_AGENTS: tuple[str, ...] = ("a", "b")
#: summary.json keys of the one-agent contract that two-agent runs do not write.
PAIR_NA_SUMMARY_KEYS: tuple[str, ...] = ("eval/recovery_rate", "eval/hack_rate", "eval/mean_turns")
PAIR_NA = "n/a (two-agent run)"
#: Metrics every pair run must log in at least one metrics.jsonl line (instead of METRIC_KEYS).
PAIR_METRIC_KEYS: tuple[str, ...] = ("eval/success", "rollout/success_rate")
STOP_NA = "two-agent runs do not log `rollout/stop/<reason>` counters"
REFERENCE_NA = "n/a (PairFix-v2 has no scripted floor / ceiling in experiments/calibrate)"


def agent_key(agent: str, key: str) -> str:
    """``agent_key("a", "critic/explained_variance_heldout") == "agent_a/critic/explained_variance_heldout"``."""
    return f"agent_{agent}/{key}"


def critic_ev_key(agent: str) -> str:
    return agent_key(agent, "critic/explained_variance_heldout")


def pair_required_metrics(frozen: Sequence[str] = ()) -> list[str]:
    """Metrics a pair run must log somewhere: :data:`PAIR_METRIC_KEYS` and, for every agent that
    is trained (not in ``frozen``), its ``critic/heldout_points``."""
    return [*PAIR_METRIC_KEYS, *(agent_key(a, "critic/heldout_points") for a in PAIR_AGENTS if a not in frozen)]


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
    from experiments.report.stats import fmt_seeds
    from experiments.report.tables import _per_seed, second_half_mean

    rows = []
    for env, methods in groups.items():
        for method, runs in methods.items():
            if method not in PAIR_METHODS:
                continue
            for a in PAIR_AGENTS:
                only = f"eval/success_bug_in_{a}_only"
                per_seed = [second_half_mean(r, critic_ev_key(a)) for r in runs]
                ev = fmt_seeds(per_seed)
                ev, ev_seeds = (EV_NA, "n/a") if ev == "n/a" else (ev, _per_seed(per_seed))
                rows.append([
                    env, method, a,
                    fmt_seeds([_summary(r, agent_key(a, only)) for r in runs]),
                    fmt_seeds([_summary(r, f"start_model/{agent_key(a, only)}") for r in runs]),
                    fmt_seeds([_summary(r, agent_key(a, "eval/file_fixed")) for r in runs]),
                    fmt_seeds([_summary(r, agent_key(a, "eval/messages_sent")) for r in runs]),
                    fmt_seeds([_summary(r, agent_key(a, "eval/format_error_rate")) for r in runs]),
                    "central (joint state)" if method == "ppo_ctde" else "local (own context)",
                    ev, ev_seeds,
                ])
    return rows


def agent_table_md(env: str, methods: Mapping[str, Sequence[Any]]) -> list[str]:
    """The markdown of the per-agent section of ``env`` (empty when no method is a pair method)."""
    if not any(m in PAIR_METHODS for m in methods):
        return []
    from experiments.report.markdown import _md_table

    return [
        "### Per agent (two-agent runs)",
        "",
        "Final held-out evaluation per agent (`agent_X/eval/...` of summary.json): the team's success on "
        "the held-out tasks whose bug is only in X's file (the start model's on the same tasks beside it), "
        "X's file computing its reference's outputs at the end, X's `send` actions and format-error rate "
        "per episode; X's critic explained variance on held-out complete returns (values before each "
        "update's fit; per seed the mean over the second half of training). ppo_ctde's critic reads the "
        "joint state (both contexts), ppo_independent's only X's own.",
        "",
        _md_table(AGENT_COLUMNS, agent_table({env: methods})),
        "",
    ]


__all__ = ["AGENT_COLUMNS", "PAIR_AGENTS", "PAIR_METHODS", "PAIR_METRIC_KEYS", "PAIR_NA", "PAIR_NA_SUMMARY_KEYS",
           "REFERENCE_NA", "STOP_NA", "agent_key", "agent_table", "agent_table_md", "critic_ev_key",
           "pair_required_metrics"]
