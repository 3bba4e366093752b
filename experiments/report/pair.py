"""Two-agent runs (``algo=ppo_ctde | ppo_independent`` on PairFix-v2, ``experiments/runtime/pair.py``)
in the report: what their run directories must hold, which single-agent columns they do not have,
and the keys of the per-agent table (the table: ``experiments.report.tables.agent_table``).

A pair run writes the team's ``eval/success`` (final held-out evaluation), ``start_model/success``,
``rollout/success_rate`` (the team's training success, the name the report reads) and the
``compute/*`` counters (``compute/rollouts`` = pair episodes; tokens, tool seconds and FLOPs sum
both agents), so the Conclusion, the success curves and the compute columns read it like a
one-agent run. It has no ``eval/recovery_rate`` / ``eval/hack_rate`` / ``eval/mean_turns``
(:data:`PAIR_NA_SUMMARY_KEYS`: the final table says :data:`PAIR_NA`), no groups (G = 1), no
``rollout/stop/<reason>`` counters and no team critic: every metric of an agent's trainer is
``agent_<X>/...`` (X in :data:`PAIR_AGENTS`), and ``tables.agent_table`` gives one row per
(method, agent): the final held-out success on tasks whose bug is only in X's file, X's file
fixed at the end, X's messages and format errors per episode (all ``agent_X/eval/...`` of
``summary.json``; the start model's ``start_model/agent_X/eval/...`` beside the first), and X's
critic explained variance on held-out complete returns (``agent_X/critic/explained_variance_heldout``,
central for ppo_ctde, local for ppo_independent; per seed the mean over the second half of
training, as for PPO's critic).
"""

from __future__ import annotations

from collections.abc import Sequence

from algos import metric_keys as mk
from algos.registry import trainers_with

#: Trainers of ``experiments/runtime/pair.py`` (``experiments.runtime.schema.PAIR_ALGOS``).
PAIR_METHODS: frozenset[str] = frozenset(trainers_with(agents=2))
PAIR_AGENTS: tuple[str, ...] = ("a", "b")
#: summary.json keys of the one-agent contract that two-agent runs do not write.
PAIR_NA_SUMMARY_KEYS: tuple[str, ...] = (mk.EVAL_RECOVERY_RATE, mk.EVAL_HACK_RATE, mk.EVAL_MEAN_TURNS)
PAIR_NA = "n/a (two-agent run)"
#: Metrics every pair run must log in at least one metrics.jsonl line (instead of METRIC_KEYS).
PAIR_METRIC_KEYS: tuple[str, ...] = (mk.EVAL_SUCCESS, mk.ROLLOUT_SUCCESS_RATE)
STOP_NA = "two-agent runs do not log `rollout/stop/<reason>` counters"
REFERENCE_NA = "n/a (PairFix-v2 has no scripted floor / ceiling in experiments/calibrate)"


#: ``agent_key("a", key) == "agent_a/" + key`` (the metric contract's, re-exported)
agent_key = mk.agent_key


def critic_ev_key(agent: str) -> str:
    return agent_key(agent, mk.CRITIC_EXPLAINED_VARIANCE_HELDOUT)


def pair_required_metrics(frozen: Sequence[str] = ()) -> list[str]:
    """Metrics a pair run must log somewhere: :data:`PAIR_METRIC_KEYS` and, for every agent that
    is trained (not in ``frozen``), its ``critic/heldout_points``."""
    return [*PAIR_METRIC_KEYS, *(agent_key(a, mk.CRITIC_HELDOUT_POINTS) for a in PAIR_AGENTS if a not in frozen)]


__all__ = ["PAIR_AGENTS", "PAIR_METHODS", "PAIR_METRIC_KEYS", "PAIR_NA", "PAIR_NA_SUMMARY_KEYS", "REFERENCE_NA",
           "STOP_NA", "agent_key", "critic_ev_key", "pair_required_metrics"]
