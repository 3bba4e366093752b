"""``python -m experiments.compare --preset horizon --horizons 8,32,64``: one compare sweep per
horizon, then the horizon report.

Horizon ``h`` runs the preset's sweep (every method x every seed, compute-matched within the
horizon) into ``<sweep-dir>/n<h>`` with ``env.kwargs.n_stages=h`` and, unless given, the warm
start's demonstrations scaled to a constant number of decisions, ``warmstart.demos = 32000 / h``
(4000 at 8 decisions, the env config's; every demo holds ``h`` lookups, so the behaviour-cloning
steps over lookups stay the same); each sweep renders its own report. Then
:func:`experiments.report.horizons.render_horizon_report` writes ``horizons.md`` and
``horizons.png`` (each difference to the baseline with its interval against the horizon, one panel
per compute axis) into ``<sweep-dir>`` and logs them to a W&B report run of the sweep's group.
Re-running with the same ``--sweep-dir`` resumes every horizon's sweep.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

from algos import metric_keys as mk
from experiments.report import ReportError
from experiments.report.horizons import HORIZON_COLUMNS, horizon_rows, render_horizon_report
from experiments.report.map import CHECK_PROB_KEY
from experiments.runtime.loggers import make_logger

#: decisions x demonstrations of the horizon preset's warm start (4000 demos at 8 decisions)
DEMO_DECISIONS = 32_000
#: the largest horizon the default compaction cap (8 per episode) serves. An episode compresses
#: about once per 6 decisions in the policy's layout (128 decisions: 21 compactions), so at 64 the
#: cap of 8 already binds in most episodes (8.8 segments per trajectory; the rest of the episode
#: runs in a growing context, 0.7-1.9 % of training episodes reach the 512-token limit); at 128 it
#: ends every demonstration at that limit (demo success 0.000). Above it the preset sets
#: ``compression.max_compactions = horizon // 4``; the measured 8 / 32 / 64 sweeps keep the default.
COMPACTION_CAP_HORIZON = 64
#: the same with check lines on (``env.kwargs.check_prob`` > 0: a ``test : passed .`` line after a
#: fix makes every segment longer): at 64 decisions the default cap ends every demonstration at the
#: 512-token limit, the cap of 64 // 4 = 16 none (tests/experiments/test_compare_horizons.py;
#: docs/environments.md)
COMPACTION_CAP_HORIZON_CHECKED = 32
HORIZON_PRESET = "horizon"


class HorizonError(ValueError):
    """A one-line explanation of an invalid ``--horizons``."""


def parse_horizons(text: str, preset: str) -> tuple[int, ...]:
    """``"8,32,128"`` -> ``(8, 32, 128)``: distinct ints >= 4 (LongHorizon-v3's ``n_rules``),
    on the horizon preset only; ``HorizonError`` otherwise."""
    if preset != HORIZON_PRESET:
        raise HorizonError(f"--horizons needs --preset {HORIZON_PRESET} (got --preset {preset})")
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise HorizonError(f"--horizons={text!r} invalid; allowed: comma-separated ints >= 4, e.g. 8,32,128") from None
    if not values or min(values) < 4 or len(set(values)) != len(values):
        raise HorizonError(f"--horizons={text!r} invalid; allowed: distinct comma-separated ints >= 4, e.g. 8,32,128")
    return values


def sets_demos(overrides: Sequence[str]) -> bool:
    """Whether ``overrides`` set ``warmstart.demos``: the value, or the tiny preset, which sets it
    (``experiment=tiny`` or ``+experiment@_global_=tiny``: configs/experiment/tiny.yaml)."""
    for o in overrides:
        key, _, value = o.lstrip("+~").partition("=")
        if key == "warmstart.demos" or (key.split("@")[0] == "experiment" and value == "tiny"):
            return True
    return False


def check_prob_of(overrides: Sequence[str]) -> float:
    """The ``env.kwargs.check_prob`` the last override of it sets (any ``+`` / ``++`` prefix);
    0 (the env's default) when none does."""
    value = 0.0
    for o in overrides:
        key, _, text = o.lstrip("+").partition("=")
        if key == CHECK_PROB_KEY:
            value = float(text)
    return value


def horizon_overrides(horizon: int, overrides: Sequence[str], tiny: bool) -> list[str]:
    """The overrides of horizon ``horizon``'s sweep: ``env.kwargs.n_stages``, (unless the user,
    the tiny preset or ``--tiny`` sets it: :func:`sets_demos`) ``warmstart.demos = DEMO_DECISIONS //
    horizon`` and, above :data:`COMPACTION_CAP_HORIZON` decisions (above
    :data:`COMPACTION_CAP_HORIZON_CHECKED` when ``overrides`` set a ``check_prob`` > 0: :func:`check_prob_of`)
    unless the user sets it, ``compression.max_compactions = horizon // 4``."""
    out = [f"env.kwargs.n_stages={horizon}"]
    if not tiny and not sets_demos(overrides):
        out.append(f"warmstart.demos={max(1, DEMO_DECISIONS // horizon)}")
    served = COMPACTION_CAP_HORIZON_CHECKED if check_prob_of(overrides) > 0 else COMPACTION_CAP_HORIZON
    if horizon > served and not any(o.startswith("compression.max_compactions=") for o in overrides):
        out.append(f"compression.max_compactions={horizon // 4}")
    return out


def horizon_dir(sweep_dir: Path, horizon: int) -> Path:
    return sweep_dir / f"n{horizon}"


def run_horizons(horizons: Sequence[int], sweep_dir: Path, run_one, methods: Sequence[str], logger: str,
                 group: str) -> int:
    """Run ``run_one(sub_dir, extra_overrides) -> exit code`` per horizon, then the horizon
    report; the first failing sweep's code is returned (later horizons are not started)."""
    t0 = time.perf_counter()
    dirs = []
    for h in horizons:
        sub = horizon_dir(sweep_dir, h)
        print(f"\n== horizon {h} decisions: {sub}", flush=True)
        code = run_one(sub, h)
        if code != 0:
            return code
        dirs.append(sub)
    try:
        markdown, png, results = render_horizon_report(dirs, sweep_dir, methods)
    except ReportError as e:
        print(f"compare: horizon report failed: {e}", file=sys.stderr)
        return 2
    print(markdown)
    log = make_logger(logger, run_dir=sweep_dir, name=f"{group}-horizons", group=group, job_type="report",
                      config={"horizons": list(horizons), "methods": list(methods), "sweeps": [str(d) for d in dirs]})
    try:
        log.log_table(mk.REPORT_HORIZONS, list(HORIZON_COLUMNS), horizon_rows(results))
        log.log_images({mk.REPORT_HORIZONS: png})
    finally:
        log.finish()
    print(f"\nhorizons {list(horizons)}: {len(dirs)} sweeps in {time.perf_counter() - t0:.0f}s; "
          f"report {sweep_dir / 'horizons.md'}", file=sys.stderr)
    return 0


__all__ = ["COMPACTION_CAP_HORIZON", "COMPACTION_CAP_HORIZON_CHECKED", "check_prob_of", "DEMO_DECISIONS", "HorizonError", "horizon_dir", "horizon_overrides", "parse_horizons", "run_horizons",
           "sets_demos"]
