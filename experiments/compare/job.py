"""The main job: a compute-matched comparison of RL methods over several seeds, then the report.

    python -m experiments.compare                       # preset "small": GRPO vs PPO on reading tasks, ~4 min on 2 cores
    python -m experiments.compare --methods grpo,ppo,rloo,gigpo   # any registered methods (baseline: the first)
    python -m experiments.compare --preset horizon --methods grpo,gigpo   # GiGPO's step groups (LongHorizon-v3)
    python -m experiments.compare --methods grpo,grpo_process -- +env.kwargs.reward_mode=process
    python -m experiments.compare --preset bugfix       # configs/experiment/compare_bugfix.yaml
    python -m experiments.compare --preset horizon --launcher ray
    python -m experiments.compare --preset pairfix      # two agents: PPO_CTDE - PPO_INDEPENDENT
    python -m experiments.compare --preset horizon --horizons 8,32,64    # one sweep per horizon + horizons.md
    python -m experiments.compare --preset horizon --horizons 8,32,64 --check-probs 0,0.5,1   # the map + map.md
    python -m experiments.compare --preset horizon --horizons 8,32 --off-policy   # staleness x sampler x correction
    python -m experiments.compare --seeds 0,1 -- budget.amount=512 eval.tasks=8   # extra overrides
    python -m experiments.compare --tiny                # seconds: seed 0, tiny model/budget (a smoke test)
                                                        #   (jobs one after another: Hydra's basic launcher)

Steps:
1. **Sweep.** Runs ``python -m experiments.train -m experiment=compare_<preset>`` as a
   subprocess: a Hydra multirun over ``algo=<methods>`` x seeds (``--methods``, default the
   preset's :data:`PRESET_METHODS` = its ``hydra.sweeper.params.algo`` (launched PPO first, the longer jobs) in the
   registry's order: ``grpo,ppo``, ``grpo,ppo,gigpo`` for ``horizon``, ``ppo_independent,ppo_ctde`` for ``pairfix``) with the joblib launcher (2 jobs at a time) or ``hydra/launcher=ray``
   (``--launcher``); ``--tiny`` without ``--launcher`` / ``--jobs`` uses Hydra's basic launcher instead
   (:func:`sweep_launcher`: the jobs run one after another inside the multirun process, so torch is
   imported once, not once per joblib worker: a smoke test's jobs take seconds, the imports dominated),
   into one sweep directory (``--sweep-dir``, default ``runs/compare/<preset>-<timestamp>``; every
   run is a subdirectory ``<env>-<algo>-s<seed>``). The command is printed and the output is shown
   live and kept in ``<sweep>/sweep.log``.
2. **Report.** :func:`experiments.report.render_report` on the sweep directory: ``report.md`` and
   the PNGs next to the runs; the markdown is printed. Its Conclusion compares every other method
   against the **baseline**, the first of ``--methods`` (default ``grpo``: PPO - GRPO; on
   ``pairfix`` ``ppo_independent``: PPO_CTDE - PPO_INDEPENDENT, does the centralized critic help).
3. **W&B summary run** (offline): one run in the sweep's group (``job_type="report"``) with the
   final table and the diagnostics table as ``wandb.Table`` and every plot as ``wandb.Image``.
   Each training run also logged itself to the same group (``job_type`` = its algorithm).

The sweep is a subprocess, supervised by :mod:`experiments.compare.supervise` (why not Hydra's
Python API, its environment, how Ctrl-C stops all of it). What a preset selects (its env,
compression and methods) is read from its config as Hydra composes it (:func:`read_preset`).

Methods (``--methods``, :func:`compare_methods`): a name must be a trainer of the registry
(``algos.registry``), whose registration says what it needs (its traits); anything else is a
one-line error before any compute (exit 2). ``grpo_process`` needs step rewards: the job does not
add them silently (every method of the sweep would then train on them), it asks for the override
``+env.kwargs.reward_mode=process`` (or ``biased_process``) and refuses a preset whose env has no
step rewards (LongHorizon pays only at the end of an episode). The two-agent trainers ``ppo_ctde`` /
``ppo_independent`` run on the ``pairfix`` preset only (and single-agent methods never there):
``experiments.train`` hands ``env=pairfix`` to ``experiments.runtime.pair``. A new method is one
registration (its traits' ``envs``).

Re-running with the same ``--sweep-dir`` resumes: each run continues from its last checkpoint
(finished runs only rewrite their summary), then the report is rendered again.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import re
import sys
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from algos import metric_keys as mk
import envs
from algos.registry import TrainerTraits, load_builtin_trainers, trainer_traits
from experiments.compare.horizons import HorizonError, horizon_dir, horizon_overrides, parse_horizons, run_horizons
from experiments.compare.map import (TINY_CEILING_ARGS, MapError, cell_dir, check_prob_override, map_cells, parse_check_probs, render_map,
                                     run_ceiling, run_map)
from experiments.compare.offpolicy import (OffPolicyError, cell_dir as offpolicy_dir, cell_jobs, offpolicy_cells,
                                           parse_off_policy, render_offpolicy, run_offpolicy)
from experiments.compare.supervise import run_sweep
from experiments.report import DIAG_COLUMNS, ReportError, diagnostics_table, group_runs, render_report, report_tables
from experiments.runtime.config import CONFIG_DIR, compose_config
from experiments.runtime.loggers import make_logger
from experiments.runtime.schema import method_envs

EXPERIMENT_DIR = CONFIG_DIR / "experiment"
#: a preset is ``configs/experiment/compare_<preset>.yaml`` including the shared setup ``compare_base``
PRESET_PREFIX = "compare_"
BASE_EXPERIMENT = "compare_base"
#: ``--preset`` when not given
DEFAULT_PRESET = "small"


def find_presets(experiment_dir: Path = EXPERIMENT_DIR) -> dict[str, str]:
    """preset -> experiment name: every ``compare_<preset>.yaml`` of ``experiment_dir`` but the
    shared setup :data:`BASE_EXPERIMENT` (which each of them includes); :data:`DEFAULT_PRESET`
    first, then by name."""
    found = {p.stem.removeprefix(PRESET_PREFIX): p.stem for p in sorted(experiment_dir.glob(f"{PRESET_PREFIX}*.yaml"))
             if p.stem != BASE_EXPERIMENT}
    return dict(sorted(found.items(), key=lambda item: item[0] != DEFAULT_PRESET))


def registry_ordered(methods: Sequence[str]) -> tuple[str, ...]:
    """``methods`` in the trainer registry's order (:func:`algos.registry.load_builtin_trainers`:
    the order of ``--methods``' allowed list); names outside the registry last, in their order."""
    rank = {m: i for i, m in enumerate(load_builtin_trainers())}
    return tuple(sorted(methods, key=lambda m: rank.get(m, len(rank))))


@dataclass(frozen=True)
class Preset:
    """What the compare job reads from a preset's composed config (:func:`read_preset`)."""

    experiment: str  # configs/experiment/<experiment>.yaml
    env: str  # its env.name (an env option's file name configs/env/<name>.yaml is its env.name)
    compression: str  # its compression option (configs/compression/<name>.yaml)
    methods: tuple[str, ...]  # its hydra.sweeper.params.algo, in the registry's order


def read_preset(experiment: str) -> Preset:
    """The env, compression option and sweep methods of ``experiment=<experiment>`` as Hydra
    composes it (``experiments.runtime.config.compose_config``: defaults lists, included
    experiments and overrides are Hydra's to resolve, not this job's)."""
    with warnings.catch_warnings():  # the launcher's schema notice (see supervise.NoticeFilter)
        warnings.filterwarnings("ignore", message=r"(?s).*validated against ConfigStore schema")
        cfg = compose_config([f"experiment={experiment}"], return_hydra_config=True)
    algo = cfg.hydra.sweeper.params.get("algo")
    methods = tuple(m.strip() for m in str(algo).split(",")) if algo else ()
    return Preset(experiment, str(cfg.env.name), str(cfg.hydra.runtime.choices.compression), registry_ordered(methods))


#: preset -> experiment (``configs/experiment/compare_<preset>.yaml``), read from the files
PRESETS: dict[str, str] = find_presets()
#: preset -> what its composed config selects (:func:`read_preset`)
PRESET_CONFIGS: dict[str, Preset] = {p: read_preset(e) for p, e in PRESETS.items()}
#: The env (``env.name``) each preset trains on.
PRESET_ENVS: dict[str, str] = {p: c.env for p, c in PRESET_CONFIGS.items()}
#: The compression option (``configs/compression/<name>.yaml``) each preset runs with.
PRESET_COMPRESSION: dict[str, str] = {p: c.compression for p, c in PRESET_CONFIGS.items()}
LAUNCHERS = ("joblib", "ray")
#: ``hydra/launcher=`` values of :func:`sweep_command`: the ``--launcher`` choices plus Hydra's
#: built-in ``basic`` (sequential, in the multirun process), which ``--tiny`` picks by default.
SWEEP_LAUNCHERS = ("basic", *LAUNCHERS)
LOGGER_KINDS = ("wandb", "none")


def compare_methods() -> dict[str, TrainerTraits]:
    """Methods the compare job runs (every trainer of the registry, registration order) and the
    traits it reads (:func:`check_methods`): ``agents`` and ``step_rewards`` (the preset's env must
    be one of ``experiments.runtime.schema.method_envs``; step rewards also need
    ``env.kwargs.reward_mode`` in the env spec's ``step_reward_modes``, an override given after
    ``--``) and ``compression`` (the sweep must run a compression strategy)."""
    return {name: trainer_traits(name) for name in load_builtin_trainers()}


#: ``--methods`` when not given, per preset: the preset's ``hydra.sweeper.params.algo`` set (read
#: from its composed config, :func:`read_preset`) in the registry's order
#: (:func:`registry_ordered`), so the baseline (the first) is the method registered first: GRPO
#: (``PPO - GRPO``; on the horizon preset GiGPO is compared with it too), and on pairfix
#: ``ppo_independent``, because the question is whether the centralized critic helps, so the
#: Conclusion reads ``PPO_CTDE - PPO_INDEPENDENT`` (positive: the central critic is ahead).
PRESET_METHODS: dict[str, tuple[str, ...]] = {p: c.methods for p, c in PRESET_CONFIGS.items()}
#: ``--methods`` of the default preset: the two methods of the main job (GRPO, PPO).
DEFAULT_METHODS: tuple[str, ...] = PRESET_METHODS[DEFAULT_PRESET]
_REWARD_MODE_KEY = re.compile(r"^\+{0,2}env\.kwargs\.reward_mode=(.*)$")


class MethodError(ValueError):
    """A ``--methods`` value the compare job cannot run (the message is the one-line error)."""


def registry_methods() -> list[str]:
    """Trainer names the compare job can run (registration order)."""
    return list(compare_methods())


def parse_methods(text: str) -> tuple[str, ...]:
    """``"grpo,rloo"`` -> ``("grpo", "rloo")`` (the order kept: the first is the report's
    baseline). :class:`MethodError` on an empty item, a repeated name, a name outside the trainer
    registry, naming the bad value and the allowed ones."""
    allowed = registry_methods()
    names = tuple(m.strip() for m in text.split(","))
    for m in names:
        if not m:
            raise MethodError(f"--methods {text!r} has an empty name; allowed: {', '.join(allowed)}")
        if m not in allowed:
            raise MethodError(f"--methods: {m!r} is not a registered trainer; allowed: {', '.join(allowed)}")
    repeated = sorted({m for m in names if names.count(m) > 1})
    if repeated:
        raise MethodError(f"--methods {text!r} names {', '.join(repeated)} more than once; give each method once")
    if len(names) < 2:
        raise MethodError(f"--methods {text!r} names one method; a comparison needs at least 2 of: {', '.join(allowed)}")
    return names


def reward_mode_override(overrides: Sequence[str]) -> str | None:
    """The value of the last ``[+]env.kwargs.reward_mode=...`` override, or None."""
    mode = None
    for o in overrides:
        hit = _REWARD_MODE_KEY.match(o)
        if hit:
            mode = hit.group(1)
    return mode


def sweep_env(preset: str, overrides: Sequence[str] = ()) -> str:
    """The ``env.name`` the sweep trains on: the preset's (:data:`PRESET_ENVS`) unless an
    ``env=<name>`` override (the last one) replaces it."""
    env = PRESET_ENVS[preset]
    for o in overrides:
        if o.startswith("env="):
            env = o.split("=", 1)[1]
    return env


def sweep_compression(preset: str, overrides: Sequence[str] = ()) -> str:
    """The compression option the sweep runs with: the preset's (:data:`PRESET_COMPRESSION`) unless
    a ``compression=<name>`` override (the last one) replaces it."""
    option = PRESET_COMPRESSION[preset]
    for o in overrides:
        if o.startswith("compression="):
            option = o.split("=", 1)[1]
    return option


def check_methods(methods: Sequence[str], preset: str, overrides: Sequence[str] = ()) -> None:
    """:class:`MethodError` (one line) when a method cannot run on ``preset`` with ``overrides``:
    the sweep's env (:func:`sweep_env`) is not one of its ``method_envs`` (a single-agent method on
    the pairfix preset, a two-agent one elsewhere, a step-reward method on an env without step
    rewards), or it needs step rewards and no ``+env.kwargs.reward_mode=<one of the env spec's
    step_reward_modes>`` override is given, or it needs compression boundaries and the sweep runs
    ``compression=none`` (:func:`sweep_compression`)."""
    env = sweep_env(preset, overrides)
    for m in methods:
        traits = trainer_traits(m)
        runs_on = method_envs(traits)
        if env not in runs_on:
            extra = f" (env {env} has no step rewards)" if traits.step_rewards else ""
            raise MethodError(f"--methods: {m!r} does not run on preset {preset!r} (env {env}){extra}; "
                              f"{m} runs on env {', '.join(runs_on)}")
        if traits.step_rewards:
            _check_step_rewards(m, envs.spec_of(env).step_reward_modes, reward_mode_override(overrides))
        if traits.compression and sweep_compression(preset, overrides) == "none":
            raise MethodError(f"--methods: {m!r} differs from its base method only at compression boundaries but "
                              f"the sweep runs compression=none; add the override `-- compression=structured_summary` "
                              f"(or another strategy; every method of the sweep then trains with it)")


def _check_step_rewards(method: str, modes: tuple[str, ...], mode: str | None) -> None:
    """:class:`MethodError` unless ``mode`` (the reward_mode override, or None) is one of ``modes``
    (the sweep env's ``step_reward_modes``, at least one)."""
    if mode in modes:
        return
    given = "no reward_mode override" if mode is None else f"env.kwargs.reward_mode={mode}"
    others = f"or {', '.join(modes[1:])}; " if len(modes) > 1 else ""
    raise MethodError(f"--methods: {method!r} needs step rewards but got {given}; add the override "
                      f"`-- +env.kwargs.reward_mode={modes[0]}` ({others}every method of the sweep then trains on it)")

#: ``--tiny``: every run of the sweep shrunk to seconds (seed 0 only unless ``--seeds`` is given):
#: the tiny preset (configs/experiment/tiny.yaml: the tiny policy's shape, a context window and
#: compression budget that fit every policy and compression option, a batch derived from the env's
#: agents and a budget of two updates) added to the compare preset by Hydra, after it, so its
#: values win over the preset's; the overrides after ``--`` win over both. The numbers only show
#: that the pipeline runs.
TINY_PRESET = "+experiment@_global_=tiny"


def sweep_launcher(launcher: str | None, tiny: bool, jobs: int | None) -> str:
    """The Hydra launcher of the sweep: ``launcher`` when given (``--launcher``); otherwise
    ``basic`` for a ``--tiny`` sweep without ``--jobs`` (its few seconds-long jobs run one after
    another in the multirun process: one torch import instead of one per joblib worker) and
    ``joblib`` for everything else (real sweeps: 2 jobs at a time)."""
    if launcher is not None:
        return launcher
    return "basic" if tiny and jobs is None else "joblib"


def experiment_override(experiment: str) -> str:
    """The Hydra override that selects preset ``configs/experiment/<experiment>.yaml``."""
    return f"experiment={experiment}"


def default_sweep_dir(preset: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / "compare" / f"{preset}-{stamp}"


def sweep_command(
    preset: str,
    sweep_dir: Path,
    group: str,
    launcher: str = "joblib",
    jobs: int | None = None,
    seeds: Sequence[int] | None = None,
    logger: str = "wandb",
    overrides: Sequence[str] = (),
    methods: Sequence[str] | None = None,
) -> list[str]:
    """The ``experiments.train`` multirun command of one comparison (``launcher``: one of
    :data:`SWEEP_LAUNCHERS`; ``jobs`` only with ``joblib``). ``methods`` None (or the set
    of the preset's :data:`PRESET_METHODS`) keeps the preset's ``algo`` sweep; otherwise
    ``algo=<m1>,<m2>,...`` is added (names are not checked here: :func:`parse_methods` does that)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; allowed: {', '.join(PRESETS)}")
    if launcher not in SWEEP_LAUNCHERS:
        raise ValueError(f"unknown launcher {launcher!r}; allowed: {', '.join(SWEEP_LAUNCHERS)}")
    if logger not in LOGGER_KINDS:
        raise ValueError(f"unknown logger {logger!r}; allowed: {', '.join(LOGGER_KINDS)}")
    cmd = [
        sys.executable, "-m", "experiments.train", "-m",
        experiment_override(PRESETS[preset]),
        f"hydra/launcher={launcher}",
        f"hydra.sweep.dir={sweep_dir}",
        f"logger.kind={logger}",
        f"logger.group={group}",
    ]
    if jobs is not None:
        if launcher != "joblib":
            raise ValueError("--jobs applies to the joblib launcher; Ray runs one job per free CPU")
        cmd.append(f"hydra.launcher.n_jobs={jobs}")
    if methods is not None and set(methods) != set(PRESET_METHODS[preset]):
        cmd.append("algo=" + ",".join(methods))
    if seeds is not None:
        cmd.append("seed=" + ",".join(str(int(s)) for s in seeds))
    cmd += list(overrides)
    return cmd


def log_report(report, kind: str, sweep_dir: Path, group: str, config: dict,
               methods: Sequence[str] | None = None) -> None:
    """The summary run: tables as wandb.Table, plots as wandb.Image, in the sweep's group
    (``methods``: the report's method order, baseline first)."""
    logger = make_logger(kind, run_dir=sweep_dir, name=f"{group}-report", group=group, job_type="report",
                         config=config)
    try:
        logger.log_table(mk.REPORT_FINAL_TABLE, report.columns, report.rows)
        logger.log_table(mk.REPORT_DIAGNOSTICS, list(DIAG_COLUMNS), diagnostics_table(group_runs(report.runs, methods)))
        stop_cols = ["env", "method", "reason", "episodes"]
        stop_rows = [[env, m, reason, n] for env, ms in report.stop_reasons.items()
                     for m, t in ms.items() for reason, n in t.items()]
        logger.log_table(mk.REPORT_STOP_REASONS, stop_cols, stop_rows)
        for name, (columns, rows) in report_tables(report).items():  # conclusion, references, transcripts
            logger.log_table(name, columns, rows)
        logger.log_images({mk.member(mk.REPORT_IMAGE, image=name): path for name, path in report.images.items()})
    finally:
        logger.finish()


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m experiments.compare",
        description="Compute-matched sweep of RL methods over seeds, then the report (see module docstring).",
    )
    p.add_argument("--methods", default=None,
                   help=f"comma-separated trainers to compare, the first is the report's baseline (default: the "
                        f"preset's, {'; '.join(f'{k}: ' + ','.join(v) for k, v in PRESET_METHODS.items())}; any of "
                        f"{', '.join(compare_methods())} that runs on the preset's env; grpo_process needs "
                        f"-- +env.kwargs.reward_mode=process)")
    p.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                   help=f"configs/experiment/compare_<preset>.yaml (default: {DEFAULT_PRESET}, ~4 min on 2 cores)")
    p.add_argument("--seeds", default=None,
                   help="comma-separated seeds (default: the preset's hydra.sweeper.params.seed)")
    p.add_argument("--sweep-dir", default=None, type=Path,
                   help="sweep directory (default runs/compare/<preset>-<timestamp>; an existing one resumes)")
    p.add_argument("--launcher", default=None, choices=LAUNCHERS,
                   help="joblib (default): local processes; ray: a Ray cluster (RAY_ADDRESS) or a local Ray "
                        "instance; not given with --tiny (and no --jobs): Hydra's basic launcher, jobs one after another")
    p.add_argument("--jobs", default=None, type=int, help="parallel jobs for joblib (default: the launcher config's 2)")
    p.add_argument("--logger", default="wandb", choices=LOGGER_KINDS, help="wandb (offline) or none")
    p.add_argument("--title", default=None, help="report title")
    p.add_argument("--dry-run", action="store_true", help="print the sweep command and exit")
    p.add_argument("--tiny", action="store_true",
                   help="seconds, not minutes: tiny runs (configs/experiment/tiny.yaml; the overrides after -- win "
                        "over it), seed 0 unless --seeds, jobs one after "
                        "another in the sweep process (Hydra's basic launcher) unless --launcher or --jobs; checks the pipeline")
    p.add_argument("--horizons", default=None,
                   help="--preset horizon only: comma-separated decisions per episode (e.g. 8,32,128): one sweep per "
                        "horizon in SWEEP_DIR/n<h>, then horizons.md / horizons.png (experiments/compare/horizons.py)")
    p.add_argument("--check-probs", default=None,
                   help="with --horizons: comma-separated env.kwargs.check_prob values (e.g. 0,0.5,1): one sweep per "
                        "(horizon, check_prob) cell in SWEEP_DIR/p<p>/n<h>, each cell's EV*, then map.md and the heat "
                        "maps (experiments/compare/map.py)")
    p.add_argument("--off-policy", default=None, nargs="*", metavar="KEY=V1,V2",
                   help="with --horizons: one sweep per (horizon, staleness x sampler dtype x correction) cell in "
                        "SWEEP_DIR/offpolicy/n<h>/k<k>-<dtype>-<correction>, then offpolicy.md and a figure per horizon; "
                        "alone the grid staleness=0,1,2,4 sampler_dtype=float32,bfloat16 "
                        "correction=none,decoupled,token-mask, narrowed by such items (experiments/compare/offpolicy.py)")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run (after --)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        methods = parse_methods(args.methods or ",".join(PRESET_METHODS[args.preset]))
        check_methods(methods, args.preset, args.overrides)
        horizons = parse_horizons(args.horizons, args.preset) if args.horizons else ()
        check_probs = parse_check_probs(args.check_probs, horizons) if args.check_probs is not None else ()
        settings = (parse_off_policy(args.off_policy, horizons, check_probs, args.launcher, args.overrides)
                    if args.off_policy is not None else ())
    except (MethodError, HorizonError, MapError, OffPolicyError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else ([0] if args.tiny else None)
    sweep_dir = (args.sweep_dir or default_sweep_dir(args.preset)).resolve()
    group = sweep_dir.name
    overrides = [TINY_PRESET, *args.overrides] if args.tiny else list(args.overrides)
    launcher = sweep_launcher(args.launcher, args.tiny, args.jobs)
    if not horizons:
        return sweep_and_report(args, methods, seeds, sweep_dir, group, launcher, overrides)

    def one_horizon(sub: Path, h: int, *cell: str) -> int:
        extra = horizon_overrides(h, [*args.overrides, *cell], args.tiny)
        return sweep_and_report(args, methods, seeds, sub, group, launcher, [*overrides, *cell, *extra])
    if settings:
        def one_cell(sub: Path, h: int, s) -> int:
            cell_args = argparse.Namespace(**{**vars(args), "jobs": cell_jobs(s, launcher, args.jobs)})
            extra = horizon_overrides(h, args.overrides, args.tiny)
            return sweep_and_report(cell_args, methods, seeds, sub, group, launcher, [*overrides, *s.overrides(), *extra])
        cells = offpolicy_cells(horizons, settings)
        if args.dry_run:
            return max(one_cell(offpolicy_dir(sweep_dir, h, s), h, s) for h, s in cells)
        return run_offpolicy(cells, sweep_dir, one_cell) or render_offpolicy(sweep_dir, methods)
    if check_probs:
        cells = map_cells(horizons, check_probs)
        if args.dry_run:
            return max(one_horizon(cell_dir(sweep_dir, p, h), h, check_prob_override(p)) for h, p in cells)
        ceiling_args = TINY_CEILING_ARGS if args.tiny else ()
        code = run_map(cells, sweep_dir, lambda sub, h, p: one_horizon(sub, h, check_prob_override(p)),
                       lambda sub: run_ceiling(sub, ceiling_args))
        return code or render_map(sweep_dir, methods)
    if args.dry_run:
        return max(one_horizon(horizon_dir(sweep_dir, h), h) for h in horizons)
    return run_horizons(horizons, sweep_dir, one_horizon, methods, args.logger, group)


def sweep_and_report(args: argparse.Namespace, methods: Sequence[str], seeds, sweep_dir: Path, group: str,
                     launcher: str, overrides: Sequence[str]) -> int:
    """One sweep into ``sweep_dir`` (printed; ``--dry-run``: only printed), its report (printed)
    and its W&B summary run; the exit code (the sweep's, or 2 when the report fails)."""
    cmd = sweep_command(args.preset, sweep_dir, group, launcher, args.jobs, seeds, args.logger, list(overrides), methods)
    print("sweep: " + " ".join(cmd), flush=True)
    if args.dry_run:
        return 0

    t0 = time.perf_counter()
    code = run_sweep(cmd, sweep_dir)
    sweep_seconds = time.perf_counter() - t0
    if code != 0:
        print(f"\ncompare: the sweep failed (exit code {code}); see {sweep_dir / 'sweep.log'}. "
              f"Re-run with --sweep-dir {sweep_dir} to resume, or render what finished with "
              f"`python -m experiments.report {sweep_dir}`.", file=sys.stderr)
        return code

    title = args.title or f"{' vs '.join(m.upper() for m in methods)}, compute-matched ({PRESETS[args.preset]})"
    try:
        report = render_report(sweep_dir, title=title, methods=methods)
    except ReportError as e:
        print(f"compare: report failed: {e}", file=sys.stderr)
        return 2
    print(report.markdown)
    config = {"preset": args.preset, "experiment": PRESETS[args.preset], "methods": list(methods), "seeds": seeds,
              "launcher": launcher, "overrides": list(overrides), "command": " ".join(cmd),
              "sweep_dir": str(sweep_dir), "sweep_seconds": sweep_seconds, "runs": len(report.runs)}
    log_report(report, args.logger, sweep_dir, group, config, methods)
    if args.logger == "wandb":
        from experiments.dashboard import specs_after_sweep

        print(specs_after_sweep(sweep_dir), file=sys.stderr)
    print(f"\nsweep {sweep_dir}: {len(report.runs)} runs in {sweep_seconds:.0f}s; report {report.path}"
          + (f"; W&B offline files under {sweep_dir / 'wandb'} and each run's wandb/" if args.logger == "wandb" else ""),
          file=sys.stderr)
    return 0
