"""The report's per-family table of a task mixture: for each task family, the start model's
held-out success and each method's final one (mean ± the t-interval over seeds), from the
``eval/family_success/<family>`` and ``start_model/family_success/<family>`` summary keys. A
family's rows stand beside the mixture's mean so a reader sees which skill each method learned."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from experiments.report.keys import FAMILY_EVAL_PREFIX, FAMILY_START_PREFIX
from experiments.report.load import Run
from experiments.report.stats import fmt_seeds


def families_of(runs: Sequence[Run]) -> list[str]:
    """The family names any run's summary reports, in first-seen order."""
    names = (k[len(FAMILY_EVAL_PREFIX):] for r in runs for k in r.summary if k.startswith(FAMILY_EVAL_PREFIX))
    return list(dict.fromkeys(names))


def family_columns(methods: Mapping[str, Sequence[Run]]) -> list[str]:
    return ["family", "start model", *(f"{m} final" for m in methods)]


def family_rows(methods: Mapping[str, Sequence[Run]]) -> list[list[str]]:
    """One row per family: its name, the start model's success (the runs' common start; ``n/a``
    when no summary has it) and each method's final success over its seeds; empty for runs on a
    single family."""
    everyone = [r for rs in methods.values() for r in rs]
    rows = []
    for name in families_of(everyone):
        starts = {r.summary.get(FAMILY_START_PREFIX + name) for r in everyone} - {None}
        start = f"{next(iter(starts)):.3f}" if len(starts) == 1 else "n/a"
        finals = [fmt_seeds([r.summary.get(FAMILY_EVAL_PREFIX + name) for r in rs]) for rs in methods.values()]
        rows.append([name, start, *finals])
    return rows
