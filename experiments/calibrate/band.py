"""``python -m experiments.calibrate``: the scripted floor / ceiling table
(:mod:`experiments.calibrate.scripted`) and, with ``--start-model``, the band of every LongHorizon-v3
horizon and of every BugFix band difficulty (``BUGFIX_BANDS``): floor, start model, ceiling.

    python -m experiments.calibrate --horizons 8 32 64 --start-model        # the horizon sweep's band
    python -m experiments.calibrate --difficulties reading --no-long-horizon --start-model   # reading's band

The start model of horizon ``h`` is the horizon preset's (``experiment=compare_horizon`` with
``env.kwargs.n_stages=h`` and the warm start's demos scaled as in
:func:`experiments.compare.horizons.horizon_overrides`, plus any Hydra overrides after ``--``):
the cached behaviour-cloning warm start a sweep at that horizon starts from, built when missing
(minutes per horizon). Its row is that warm start's own held-out evaluation (the sweep's protocol,
``eval.tasks`` x ``eval.samples_per_task`` attempts), the number every run of the sweep reports as
``start_model/success``. The band check of a horizon asks: start model in [0.15, 0.60], the best
floor agent at least 0.10 below the start model, the oracle >= 0.95.

A BugFix band difficulty's start model is the main job's (``experiment=compare_small`` with
``env.kwargs.difficulty=<difficulty>``, plus the overrides after ``--``): its cached warm start,
built when missing, and that warm start's own held-out evaluation (``eval.tasks`` x
``eval.samples_per_task`` attempts). Its band check (printed with or without ``--start-model``)
asks: the best floor agent <= 0.15, the oracle >= 0.95, and the start model >= the best floor +
0.15; a failing BugFix band check makes the exit status 1.

With ``--zero-shot`` a ``zero_shot`` row precedes each start model's: the same policy before its
warm start (a pretrained model's own weights, LoRA adapters at zero; the tiny policy's random
init), evaluated by the start model's protocol (``experiments.runtime.warmstart.zero_shot_evaluation``):

    python -m experiments.calibrate --difficulties reading --no-long-horizon --start-model --zero-shot -- policy=smollm2
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from hydra.errors import HydraException

from algos import metric_keys as mk
import envs
from envs.bugfix import DIFFICULTIES, SPLITS
from envs.bugfix.config import MIXTURES
from experiments.compare.horizons import horizon_overrides
from experiments.calibrate.scripted import (CEILING_TARGET, DEFAULT_HORIZONS, DEFAULT_MISTAKE_RATES, Row, calibrate,
                                            checks, format_table)
from experiments.report.keys import FAMILY_EVAL_PREFIX
from experiments.runtime.config import compose_config, validate
from experiments.runtime.schema import ConfigError, TrainConfig
from experiments.runtime.warmstart import ensure_warmstart, zero_shot_evaluation

START_RANGE = (0.15, 0.60)  # the start model's held-out success at every sweep horizon
FLOOR_GAP = 0.10  # the best floor agent at least this far below the start model
START_AGENT = "start_model"
ZERO_SHOT_AGENT = "zero_shot"  # the start model's policy before its warm start
HORIZON_EXPERIMENT = "experiment=compare_horizon"
# BugFix difficulties built for the main job's band: the floor, the start model's lead, the preset
BUGFIX_BANDS = ("reading", "graded")
BUGFIX_FLOOR_MAX = 0.15
START_LEAD = 0.15
# a band whose start model must sit in the middle (the main job's task mixture): the range every
# warm-start seed's start model lands in, and the most the seeds may differ
MIDDLE_BANDS = {"graded": (0.35, 0.65)}
START_SPREAD = 0.15
BUGFIX_EXPERIMENT = "experiment=compare_small"
# the compare preset names its run directory and W&B group after Hydra's runtime, which a composed
# config lacks; neither is part of the warm start's cache key
OUTSIDE_HYDRA = ("run_dir=unused", "logger.group=calibrate")


def start_model_overrides(horizon: int, overrides: Sequence[str] = ()) -> list[str]:
    """The Hydra overrides of the horizon preset's config at ``horizon`` decisions."""
    return [HORIZON_EXPERIMENT, *OUTSIDE_HYDRA, *overrides, *horizon_overrides(horizon, overrides, tiny=False)]


def start_model_config(horizon: int, overrides: Sequence[str] = ()) -> TrainConfig:
    """The validated config of the horizon preset at ``horizon`` decisions."""
    return validate(compose_config(start_model_overrides(horizon, overrides)))


def start_model_row(horizon: int, c: TrainConfig) -> Row:
    """The start model of config ``c`` (the horizon preset at ``horizon`` decisions) as a
    calibration row: its warm start's held-out evaluation (built when missing). LongHorizon-v3 pays
    0 or 1 and has no hack detectors, so the reward count is the rate times the scored episodes and
    nothing is flagged."""
    return start_row(envs.LONG_HORIZON_V3_ID, f"stages={horizon}", c)


def bugfix_start_model_config(difficulty: str, overrides: Sequence[str] = ()) -> TrainConfig:
    """The validated config of the main job's preset on BugFix ``difficulty``."""
    return validate(compose_config([BUGFIX_EXPERIMENT, *OUTSIDE_HYDRA, f"env.kwargs.difficulty={difficulty}",
                                    *overrides]))


def start_row(env_id: str, difficulty: str, c: TrainConfig) -> Row:
    """The start model of config ``c`` as a calibration row: its warm start's held-out evaluation
    (built when missing)."""
    return eval_row(env_id, difficulty, START_AGENT, ensure_warmstart(c).start_eval)


def zero_shot_row(env_id: str, difficulty: str, c: TrainConfig) -> Row:
    """The policy of config ``c`` before its warm start (a pretrained model's own weights) as a
    calibration row: the start model's evaluation protocol (``zero_shot_evaluation``)."""
    return eval_row(env_id, difficulty, ZERO_SHOT_AGENT, zero_shot_evaluation(c))


def eval_row(env_id: str, difficulty: str, agent: str, ev: dict) -> Row:
    """An evaluation dict (``algos.evaluation.evaluate``) as a calibration row of role ``start``. The
    reward and hack counts are the rates times the scored episodes; detector matches are not
    recorded there (flagged 0)."""
    episodes, masked = int(ev[mk.EVAL_EPISODES]), int(ev[mk.EVAL_MASKED])
    scored = episodes - masked
    return Row(env_id, difficulty, agent, "start", True, None, episodes, masked,
               round(ev[mk.EVAL_SUCCESS] * scored), round(ev[mk.EVAL_TRAIN_REWARD] * scored),
               round(ev[mk.EVAL_HACK_RATE] * scored), 0, ev[mk.EVAL_MEAN_TURNS], math.nan)


def bugfix_band_checks(rows: list[Row]) -> list[str]:
    """One line per ``BUGFIX_BANDS`` difficulty in ``rows``: the best floor agent <=
    ``BUGFIX_FLOOR_MAX`` and the oracle >= ``CEILING_TARGET`` (for a mixture, on the mixture and on
    every family's rows ``<difficulty>/<family>``); with start-model rows, the start part
    (:func:`start_part`). Each number with its 95 % Wilson interval."""
    out = []
    for d in dict.fromkeys(r.difficulty for r in rows if r.env == envs.BUGFIX_ID and r.difficulty in BUGFIX_BANDS):
        labels = dict.fromkeys(r.difficulty for r in rows if r.env == envs.BUGFIX_ID
                               and (r.difficulty == d or r.difficulty.startswith(d + "/")))
        parts = []
        for label in labels:
            mine = {r.agent: r for r in rows if r.env == envs.BUGFIX_ID and r.difficulty == label}
            floors = [r for r in mine.values() if r.role == "floor"]
            if not floors or "oracle" not in mine:
                continue
            worst, oracle = max(floors, key=lambda r: r.success), mine["oracle"]
            name = "" if label == d else label[len(d) + 1:] + " "
            parts += [f"{name}floor max {_with_interval(worst)} ({worst.agent}) <= {BUGFIX_FLOOR_MAX:.2f} "
                      f"{_verdict(worst.success <= BUGFIX_FLOOR_MAX)}",
                      f"{name}oracle {_with_interval(oracle)} >= {CEILING_TARGET:.2f} "
                      f"{_verdict(oracle.success >= CEILING_TARGET)}"]
            if label == d:
                parts += start_part(d, [r for r in mine.values() if r.agent.startswith(START_AGENT)], worst)
        if parts:
            out.append(f"check band {d}: " + " | ".join(parts))
    return out


def start_part(difficulty: str, starts: list[Row], floor: Row) -> list[str]:
    """The start models' part of a band check: for a ``MIDDLE_BANDS`` difficulty every start model
    (one per warm-start seed) in its range and at most ``START_SPREAD`` between the highest and
    the lowest; otherwise the start model >= the best floor + ``START_LEAD``."""
    if not starts:
        return []
    if difficulty not in MIDDLE_BANDS:
        lead = starts[0].success - floor.success
        return [f"start model {_with_interval(starts[0])} >= floor + {START_LEAD:.2f} {_verdict(lead >= START_LEAD - 1e-9)}"]
    low, high = MIDDLE_BANDS[difficulty]
    values = [r.success for r in starts]
    spread = max(values) - min(values)
    return [f"start model {' / '.join(_with_interval(r) for r in starts)} in [{low:.2f}, {high:.2f}] "
            f"{_verdict(all(low <= v <= high for v in values))}",
            f"start spread {spread:.3f} over {len(starts)} warm-start seed(s) <= {START_SPREAD:.2f} "
            f"{_verdict(spread <= START_SPREAD + 1e-9)}"]


def _with_interval(row: Row) -> str:
    low, high = row.interval
    return f"{row.success:.3f} [{low:.3f}, {high:.3f}]"


def _verdict(ok: bool) -> str:
    return "ok" if ok else "FAIL"


def band_checks(rows: list[Row]) -> list[str]:
    """One line per LongHorizon-v3 horizon with a start-model row: start model in
    :data:`START_RANGE`, the best floor agent at least :data:`FLOOR_GAP` below it, the oracle
    >= ``CEILING_TARGET``."""
    out = []
    for d in dict.fromkeys(r.difficulty for r in rows if r.agent == START_AGENT and r.env == envs.LONG_HORIZON_V3_ID):
        mine = {r.agent: r for r in rows if r.env == envs.LONG_HORIZON_V3_ID and r.difficulty == d}
        start = mine[START_AGENT]
        worst = max((r for r in mine.values() if r.role == "floor"), key=lambda r: r.success)
        oracle = mine["oracle"]
        low, high = start.interval
        in_range = START_RANGE[0] <= start.success <= START_RANGE[1]
        gap = start.success - worst.success
        out.append(
            f"check band LongHorizon-v3 {d}: start model {start.success:.3f} [{low:.3f}, {high:.3f}] in "
            f"[{START_RANGE[0]:.2f}, {START_RANGE[1]:.2f}] {'ok' if in_range else 'FAIL'} | floor max "
            f"{worst.success:.3f} ({worst.agent}) <= start - {FLOOR_GAP:.2f} {'ok' if gap >= FLOOR_GAP - 1e-9 else 'FAIL'}"
            f" | oracle {oracle.success:.3f} >= {CEILING_TARGET:.2f} {'ok' if oracle.success >= CEILING_TARGET else 'FAIL'}")
    return out


def with_start_models(rows: list[Row], configs: dict[int, TrainConfig],
                      bugfix_configs: dict[str, list[TrainConfig]] | None = None, zero_shot: bool = False) -> list[Row]:
    """``rows`` with each horizon's start-model row (``configs``: horizon -> its config) and each
    BugFix band difficulty's (``bugfix_configs``: difficulty -> its configs, one per warm-start
    seed: rows ``start_model_s<seed>`` when there are several) after that horizon's or
    difficulty's last scripted row; with ``zero_shot``, the same policy's row before its warm
    start first."""
    out = list(rows)
    todo = [(envs.LONG_HORIZON_V3_ID, f"stages={h}", [c]) for h, c in configs.items()]
    todo += [(envs.BUGFIX_ID, d, cs) for d, cs in (bugfix_configs or {}).items()]
    for env_id, d, cs in todo:
        last = max(i for i, r in enumerate(out) if r.env == env_id and r.difficulty == d)
        added = [zero_shot_row(env_id, d, cs[0])] if zero_shot else []
        families: list[Row] = []
        for c in cs:
            agent = START_AGENT if len(cs) == 1 else f"{START_AGENT}_s{c.warmstart.seed}"
            ev = ensure_warmstart(c).start_eval
            added.append(eval_row(env_id, d, agent, ev))
            families += family_start_rows(env_id, d, agent, ev)
        out[last + 1:last + 1] = added
        for row in families:  # after the last row of the row's family
            at = max(i for i, r in enumerate(out) if r.env == env_id and r.difficulty == row.difficulty)
            out.insert(at + 1, row)
    return out


def family_start_rows(env_id: str, difficulty: str, agent: str, ev: dict) -> list[Row]:
    """One start row per task family of a mixture's start-model evaluation
    (``eval/family_success/<f>`` and ``eval/family_scored/<f>``), labelled ``<difficulty>/<f>``;
    its successes are the rate times the family's scored episodes (its reward rate and turns are not
    recorded per family: NaN)."""
    rows = []
    for key in (k for k in ev if k.startswith(FAMILY_EVAL_PREFIX)):
        family = key[len(FAMILY_EVAL_PREFIX):]
        scored = int(ev[mk.member(mk.EVAL_FAMILY_SCORED, family=family)])
        rows.append(Row(env_id, f"{difficulty}/{family}", agent, "start", True, None, scored, 0,
                        round(ev[key] * scored), math.nan, 0, 0, math.nan, math.nan))
    return rows


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A bad argument is one ``parser.error`` line (exit 2) naming it and what is allowed."""
    if args.episodes < 1:
        parser.error(f"--episodes={args.episodes} invalid; allowed: an int >= 1")
    bad = [m for m in args.mistake_rates if not 0.0 <= m <= 1.0]
    if bad:
        parser.error(f"--mistake-rates {bad} invalid; allowed: numbers in [0, 1]")
    bad = [h for h in args.horizons if not 4 <= h <= 1000]
    if bad:
        parser.error(f"--horizons {bad} invalid; allowed: ints in 4..1000 (LongHorizon-v3 n_stages at n_rules 4)")
    if args.warmstart_seeds and not args.start_model:
        parser.error("--warmstart-seeds given without --start-model; allowed: --warmstart-seeds with --start-model only")
    if args.zero_shot and not args.start_model:
        parser.error("--zero-shot given without --start-model; allowed: --zero-shot with --start-model only")
    if args.overrides and not args.start_model:
        parser.error(f"overrides {args.overrides} given without --start-model; allowed: overrides after -- with "
                     f"--start-model only")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.calibrate",
                                     description="Floor / ceiling calibration with scripted agents, and the start "
                                                 "model of every LongHorizon-v3 horizon (see experiments/calibrate/band.py).")
    parser.add_argument("--episodes", type=int, default=1000, help="episodes per scripted row")
    parser.add_argument("--seed", type=int, default=0, help="episode i uses env seed seed + i")
    bugfix = [*DIFFICULTIES, *MIXTURES]
    parser.add_argument("--difficulties", nargs="+", default=bugfix, choices=bugfix,
                        help="BugFix difficulties; a task mixture (graded) also prints a row per family")
    parser.add_argument("--mistake-rates", nargs="+", type=float, default=list(DEFAULT_MISTAKE_RATES),
                        help="noisy_oracle's chance of a mistake per decision, one row each")
    parser.add_argument("--split", default="heldout", choices=list(SPLITS))
    parser.add_argument("--no-long-horizon", action="store_true", help="skip the LongHorizon rows")
    parser.add_argument("--horizons", nargs="*", type=int, default=list(DEFAULT_HORIZONS),
                        help="LongHorizon-v3 n_stages values, one block of rows each (none: no v3 rows)")
    parser.add_argument("--start-model", action="store_true",
                        help="also the horizon preset's start model at each --horizons value and the main job's start "
                             f"model on each of {', '.join(BUGFIX_BANDS)} in --difficulties (cached warm starts, built "
                             "when missing: minutes each) and the band checks")
    parser.add_argument("--warmstart-seeds", nargs="+", type=int, default=None,
                        help="with --start-model: a BugFix band difficulty's start model for each of these "
                             "warmstart.seed values (default: the preset's seed only)")
    parser.add_argument("--zero-shot", action="store_true",
                        help="with --start-model: also each start model's policy before its warm start (a pretrained "
                             "model's own weights), evaluated as the start model is (the zero_shot rows)")
    parser.add_argument("overrides", nargs="*", help="--start-model only: Hydra overrides of the start models' config "
                                                     "(after --)")
    args = parser.parse_args(argv)
    check_args(parser, args)
    horizons = tuple(args.horizons) if not args.no_long_horizon else ()
    bands = [d for d in args.difficulties if d in BUGFIX_BANDS]
    if args.start_model and not horizons and not bands:
        parser.error(f"--start-model needs LongHorizon-v3 horizons (--horizons H ... without --no-long-horizon) or a "
                     f"band difficulty in --difficulties ({', '.join(BUGFIX_BANDS)})")
    configs: dict[int, TrainConfig] = {}
    bugfix_configs: dict[str, TrainConfig] = {}
    if args.start_model:  # a bad override fails here, in one line, before any episode is played
        try:
            configs = {h: start_model_config(h, args.overrides) for h in horizons}
            seeds = [[f"warmstart.seed={k}"] for k in args.warmstart_seeds] if args.warmstart_seeds else [[]]
            bugfix_configs = {d: [bugfix_start_model_config(d, [*args.overrides, *k]) for k in seeds] for d in bands}
        except (ConfigError, HydraException, ValueError) as e:
            parser.error(f"--start-model config: {str(e).splitlines()[0]}")
    rows = calibrate(args.difficulties, args.episodes, args.seed, tuple(args.mistake_rates), args.split,
                     not args.no_long_horizon, horizons)
    if args.start_model:
        rows = with_start_models(rows, configs, bugfix_configs, args.zero_shot)
    print(f"calibration: {args.episodes} episodes per row, seed {args.seed}, split {args.split}, task_index = i, "
          f"success = verified among unmasked episodes, 95% Wilson interval, reward = train_reward > 0, "
          f"hack = train_reward > 0 and verified == 0"
          + ("; start_model rows: the preset's warm start, its own held-out evaluation" if args.start_model else "")
          + ("; zero_shot rows: the same policy before its warm start, evaluated alike" if args.zero_shot else ""))
    print(format_table(rows))
    bugfix_bands = bugfix_band_checks(rows)
    for line in checks(rows) + band_checks(rows) + bugfix_bands:
        print(line)
    return 1 if any("FAIL" in line for line in bugfix_bands) else 0
