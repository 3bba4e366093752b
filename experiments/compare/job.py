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

Why a subprocess and not Hydra's Python API: ``hydra.compose`` cannot run a multirun or a
launcher; calling ``@hydra.main`` in-process means faking ``sys.argv`` and sharing Hydra's global
state with this process. The subprocess is exactly the command a user would type (printed, so any
sweep can be re-run or extended by hand), keeps each sweep's state isolated, and lets this job set
the environment of every run (one BLAS thread per job, W&B offline).

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
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf

import envs
from algos.registry import TrainerTraits, load_builtin_trainers, trainer_traits
from experiments.compare.horizons import HorizonError, horizon_dir, horizon_overrides, parse_horizons, run_horizons
from experiments.compare.map import (TINY_CEILING_ARGS, MapError, cell_dir, check_prob_override, map_cells, parse_check_probs, render_map,
                                     run_ceiling, run_map)
from experiments.report import DIAG_COLUMNS, ReportError, diagnostics_table, group_runs, render_report, report_tables
from experiments.runtime.loggers import make_logger

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
EXPERIMENT_DIR = CONFIG_DIR / "experiment"
#: a preset is ``configs/experiment/compare_<preset>.yaml`` including the shared setup ``compare_base``
PRESET_PREFIX = "compare_"
BASE_EXPERIMENT = "compare_base"
#: ``--preset`` when not given
DEFAULT_PRESET = "small"


def _defaults(path: Path) -> list:
    """The defaults list of the config file ``path`` (``[]`` when it has none)."""
    return list(OmegaConf.to_container(OmegaConf.load(path)).get("defaults") or [])


def find_presets(experiment_dir: Path = EXPERIMENT_DIR) -> dict[str, str]:
    """preset -> experiment name: every ``compare_<preset>.yaml`` of ``experiment_dir`` whose
    defaults list includes :data:`BASE_EXPERIMENT`; :data:`DEFAULT_PRESET` first, then by name."""
    found = {p.stem.removeprefix(PRESET_PREFIX): p.stem for p in sorted(experiment_dir.glob(f"{PRESET_PREFIX}*.yaml"))
             if BASE_EXPERIMENT in _defaults(p)}
    return dict(sorted(found.items(), key=lambda item: item[0] != DEFAULT_PRESET))


def experiment_env(experiment: str, experiment_dir: Path = EXPERIMENT_DIR) -> str | None:
    """The env option that ``<experiment_dir>/<experiment>.yaml`` selects: the last ``override /env``
    entry of its defaults list, or of an experiment file it includes (in list order, the last one
    wins); ``None`` when none selects one."""
    env = None
    for entry in _defaults(experiment_dir / f"{experiment}.yaml"):
        if isinstance(entry, dict) and "override /env" in entry:
            env = entry["override /env"]
        elif isinstance(entry, str) and entry != "_self_":
            env = experiment_env(entry, experiment_dir) or env
    return env


def experiment_methods(experiment: str, experiment_dir: Path = EXPERIMENT_DIR) -> tuple[str, ...]:
    """The ``hydra.sweeper.params.algo`` names of ``<experiment_dir>/<experiment>.yaml``: its own
    value, else that of the last experiment file of its defaults list (recursively) that sets one;
    ``()`` when none does."""
    found: tuple[str, ...] = ()
    for entry in _defaults(experiment_dir / f"{experiment}.yaml"):
        if isinstance(entry, str) and entry != "_self_":
            found = experiment_methods(entry, experiment_dir) or found
    data = OmegaConf.to_container(OmegaConf.load(experiment_dir / f"{experiment}.yaml"))
    algo = ((data.get("hydra") or {}).get("sweeper") or {}).get("params", {}).get("algo")
    return tuple(m.strip() for m in str(algo).split(",")) if algo else found


def registry_ordered(methods: Sequence[str]) -> tuple[str, ...]:
    """``methods`` in the trainer registry's order (:func:`algos.registry.load_builtin_trainers`:
    the order of ``--methods``' allowed list); names outside the registry last, in their order."""
    rank = {m: i for i, m in enumerate(load_builtin_trainers())}
    return tuple(sorted(methods, key=lambda m: rank.get(m, len(rank))))


def default_env(config_dir: Path = CONFIG_DIR) -> str:
    """The env option of ``configs/config.yaml``'s defaults list (a run's env without ``env=``)."""
    return next(e["env"] for e in _defaults(config_dir / "config.yaml") if isinstance(e, dict) and "env" in e)


#: preset -> experiment (``configs/experiment/compare_<preset>.yaml``), read from the files
PRESETS: dict[str, str] = find_presets()
#: The env (``env.name``) each preset trains on, read from its experiment file (an env option's
#: file name ``configs/env/<name>.yaml`` is its ``env.name``, as ``env=<name>`` overrides assume).
PRESET_ENVS: dict[str, str] = {p: experiment_env(e) or default_env() for p, e in PRESETS.items()}
LAUNCHERS = ("joblib", "ray")
#: ``hydra/launcher=`` values of :func:`sweep_command`: the ``--launcher`` choices plus Hydra's
#: built-in ``basic`` (sequential, in the multirun process), which ``--tiny`` picks by default.
SWEEP_LAUNCHERS = ("basic", *LAUNCHERS)
LOGGER_KINDS = ("wandb", "none")

#: Environment of the sweep subprocess (and so of every job): one thread per BLAS/OpenMP pool so
#: parallel jobs do not oversubscribe the cores; W&B never goes online or asks for a login.
SWEEP_ENV: dict[str, str] = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "WANDB_MODE": "offline",
    "WANDB_SILENT": "true",
    "WANDB_DISABLE_GIT": "true",
    "PYTHONUNBUFFERED": "1",
}


def compare_methods() -> dict[str, TrainerTraits]:
    """Methods the compare job runs (every trainer of the registry, registration order) and the
    traits it reads: ``envs`` (the preset's env must be one of them) and ``step_rewards`` (it
    needs ``env.kwargs.reward_mode`` in :data:`STEP_REWARD_MODES`, an override given after ``--``)."""
    return {name: trainer_traits(name) for name in load_builtin_trainers()}


#: ``--methods`` when not given, per preset: the preset's ``hydra.sweeper.params.algo`` set (read
#: from its experiment file, :func:`experiment_methods`) in the registry's order
#: (:func:`registry_ordered`), so the baseline (the first) is the method registered first: GRPO
#: (``PPO - GRPO``; on the horizon preset GiGPO is compared with it too), and on pairfix
#: ``ppo_independent``, because the question is whether the centralized critic helps, so the
#: Conclusion reads ``PPO_CTDE - PPO_INDEPENDENT`` (positive: the central critic is ahead).
PRESET_METHODS: dict[str, tuple[str, ...]] = {p: registry_ordered(experiment_methods(e)) for p, e in PRESETS.items()}
#: ``--methods`` of the default preset: the two methods of the main job (GRPO, PPO).
DEFAULT_METHODS: tuple[str, ...] = PRESET_METHODS[DEFAULT_PRESET]
#: ``env.kwargs.reward_mode`` values that pay per-step rewards (BugFix-v2; LongHorizon-v1 has none).
STEP_REWARD_MODES: tuple[str, ...] = ("process", "biased_process")
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


def check_methods(methods: Sequence[str], preset: str, overrides: Sequence[str] = ()) -> None:
    """:class:`MethodError` (one line) when a method cannot run on ``preset`` with ``overrides``:
    the sweep's env (:func:`sweep_env`) is not in its ``envs`` (a single-agent method on the
    pairfix preset, a two-agent one elsewhere), or it needs step rewards and no
    ``+env.kwargs.reward_mode=<one of STEP_REWARD_MODES>`` override is given."""
    env = sweep_env(preset, overrides)
    for m in methods:
        spec = trainer_traits(m)
        if env not in spec.envs:
            extra = f" (env {env} has no step rewards)" if spec.step_rewards else ""
            raise MethodError(f"--methods: {m!r} does not run on preset {preset!r} (env {env}){extra}; "
                              f"{m} runs on env {', '.join(spec.envs)}")
        if spec.step_rewards:
            mode = reward_mode_override(overrides)
            if mode not in STEP_REWARD_MODES:
                given = "no reward_mode override" if mode is None else f"env.kwargs.reward_mode={mode}"
                raise MethodError(f"--methods: {m!r} needs step rewards but got {given}; add the override "
                                  f"`-- +env.kwargs.reward_mode=process` (or biased_process; every method "
                                  f"of the sweep then trains on it)")

#: ``--tiny``: every run of the sweep shrunk to seconds and seed 0 only unless ``--seeds`` is
#: given; appended after the user's overrides, so it always wins; the numbers only show that the
#: pipeline runs. One entry per env (:data:`TINY_OVERRIDES_BY_ENV`, chosen by :func:`tiny_overrides`
#: from the sweep's env), because some knobs are config errors on the other envs.
#: Single-agent envs: the tiny policy and a compression budget that fits its
#: 256-token context, 16 rollouts (2 tasks x G=4 per update), a 16-demo warm start cloned in one
#: process (a second BC process costs seconds of start-up for one minibatch), 4 eval episodes.
TINY_OVERRIDES: tuple[str, ...] = (
    "policy.d_model=32", "policy.n_layers=1", "policy.n_heads=2", "policy.max_len=256",
    "compression.budget_tokens=128",
    "algo.tasks_per_update=2", "algo.group_size=4", "rollout.num_envs=8", "budget.amount=16",
    "eval.every=1", "eval.tasks=2", "eval.samples_per_task=2",
    "warmstart.demos=16", "warmstart.epochs=1", "warmstart.eval_tasks=2", "warmstart.processes=1",
)
#: PairFix (two agents): no ``algo.group_size`` (a pair run needs G = 1) and no compression knob
#: (a pair run has none); 8 pair episodes (2 updates of 4), a 16-demo pair warm start, 4 eval
#: episodes after each update (the start model's too).
TINY_OVERRIDES_PAIR: tuple[str, ...] = (
    "policy.d_model=32", "policy.n_layers=1", "policy.n_heads=2", "policy.max_len=256",
    "algo.tasks_per_update=4", "rollout.num_envs=4", "budget.amount=8",
    "eval.every=1", "eval.tasks=2", "eval.samples_per_task=2",
    "warmstart.demos=16", "warmstart.epochs=1",
)
#: ``--tiny`` overrides by the env spec's number of agents (``EnvSpec.agents``).
TINY_OVERRIDES_BY_AGENTS: dict[int, tuple[str, ...]] = {1: TINY_OVERRIDES, 2: TINY_OVERRIDES_PAIR}
#: ``--tiny`` overrides per ``env.name``: every env spec's, chosen by its number of agents.
TINY_OVERRIDES_BY_ENV: dict[str, tuple[str, ...]] = {s.name: TINY_OVERRIDES_BY_AGENTS[s.agents] for s in envs.SPECS}


def tiny_overrides(preset: str, overrides: Sequence[str] = ()) -> tuple[str, ...]:
    """The ``--tiny`` overrides of the sweep's env (:func:`sweep_env`); :class:`MethodError` for an
    env without an entry in :data:`TINY_OVERRIDES_BY_ENV`."""
    env = sweep_env(preset, overrides)
    if env not in TINY_OVERRIDES_BY_ENV:
        raise MethodError(f"--tiny: env {env!r} has no tiny overrides; allowed envs: {', '.join(TINY_OVERRIDES_BY_ENV)}")
    return TINY_OVERRIDES_BY_ENV[env]


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


_SCHEMA_NOTICE = re.compile(r"^'hydra/launcher/\w+' is validated against ConfigStore schema")


class _NoticeFilter:
    """Drops Hydra's multi-line "validated against ConfigStore schema ... deprecated" notice from
    the terminal echo (every job prints it because configs/hydra/launcher/*.yaml shadow the
    plugins' schemas on purpose); sweep.log keeps everything."""

    def __init__(self) -> None:
        self.held: str | None = None  # a "...: UserWarning: " line waiting for its message
        self.skip = 0

    def __call__(self, line: str) -> str:
        if self.skip:
            self.skip -= 1
            if self.skip == 0 and not line.startswith("  "):
                return self(line)  # the notice had no source line: this line is the next output
            return ""
        if self.held is not None:
            held, self.held = self.held, None
            if _SCHEMA_NOTICE.match(line):
                self.skip = 3  # 2 more message lines + the source line
                return ""
            return held + line
        if line.rstrip("\n").endswith("UserWarning: "):
            self.held = line
            return ""
        return line


#: Seconds the sweep's processes get to stop after SIGTERM before the rest of its group is killed.
STOP_GRACE_SECONDS = 20.0


def run_sweep(cmd: Sequence[str], sweep_dir: Path, env: dict[str, str] | None = None) -> int:
    """Run the multirun, echoing its output live and into ``<sweep>/sweep.log``; its exit code.

    The sweep runs in a session (process group) of its own, and Ctrl-C or SIGTERM to this process
    stops all of it, the launcher's worker processes included (``stop_group``): each run stops as
    on Ctrl-C, with its last update's checkpoint on disk, so re-running resumes; no worker is left
    holding a warm-start lock."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **SWEEP_ENV, **(env or {})}
    echo = _NoticeFilter()
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if main_thread else None
    try:
        with open(sweep_dir / "sweep.log", "a") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env=full_env, bufsize=1, start_new_session=True)
            assert proc.stdout is not None
            try:
                for line in proc.stdout:
                    log.write(line)
                    log.flush()
                    shown = echo(line)
                    if shown:
                        sys.stdout.write(shown)
                        sys.stdout.flush()
                return proc.wait()
            except KeyboardInterrupt:
                stop_group(proc)
                raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def stop_group(proc: subprocess.Popen, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM to ``proc``'s whole process group (it leads its own session), up to ``grace``
    seconds for the group to empty, then SIGKILL to whatever is left; reaps ``proc``."""
    def group_alive() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return False
        return True

    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait()
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, or it stays a zombie member of its group
        if not group_alive():
            break
        time.sleep(0.1)
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def log_report(report, kind: str, sweep_dir: Path, group: str, config: dict,
               methods: Sequence[str] | None = None) -> None:
    """The summary run: tables as wandb.Table, plots as wandb.Image, in the sweep's group
    (``methods``: the report's method order, baseline first)."""
    logger = make_logger(kind, run_dir=sweep_dir, name=f"{group}-report", group=group, job_type="report",
                         config=config)
    try:
        logger.log_table("report/final_table", report.columns, report.rows)
        logger.log_table("report/diagnostics", list(DIAG_COLUMNS), diagnostics_table(group_runs(report.runs, methods)))
        stop_cols = ["env", "method", "reason", "episodes"]
        stop_rows = [[env, m, reason, n] for env, ms in report.stop_reasons.items()
                     for m, t in ms.items() for reason, n in t.items()]
        logger.log_table("report/stop_reasons", stop_cols, stop_rows)
        for name, (columns, rows) in report_tables(report).items():  # conclusion, references, transcripts
            logger.log_table(name, columns, rows)
        logger.log_images({f"report/{name}": path for name, path in report.images.items()})
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
                   help="seconds, not minutes: tiny runs (TINY_OVERRIDES), seed 0 unless --seeds, jobs one after "
                        "another in the sweep process (Hydra's basic launcher) unless --launcher or --jobs; checks the pipeline")
    p.add_argument("--horizons", default=None,
                   help="--preset horizon only: comma-separated decisions per episode (e.g. 8,32,128): one sweep per "
                        "horizon in SWEEP_DIR/n<h>, then horizons.md / horizons.png (experiments/compare/horizons.py)")
    p.add_argument("--check-probs", default=None,
                   help="with --horizons: comma-separated env.kwargs.check_prob values (e.g. 0,0.5,1): one sweep per "
                        "(horizon, check_prob) cell in SWEEP_DIR/p<p>/n<h>, each cell's EV*, then map.md and the heat "
                        "maps (experiments/compare/map.py)")
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run (after --)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        methods = parse_methods(args.methods or ",".join(PRESET_METHODS[args.preset]))
        check_methods(methods, args.preset, args.overrides)
        tiny = tiny_overrides(args.preset, args.overrides) if args.tiny else ()
        horizons = parse_horizons(args.horizons, args.preset) if args.horizons else ()
        check_probs = parse_check_probs(args.check_probs, horizons) if args.check_probs is not None else ()
    except (MethodError, HorizonError, MapError) as e:
        print(f"compare: {e}", file=sys.stderr)
        return 2
    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else ([0] if args.tiny else None)
    sweep_dir = (args.sweep_dir or default_sweep_dir(args.preset)).resolve()
    group = sweep_dir.name
    overrides = [*args.overrides, *tiny]
    launcher = sweep_launcher(args.launcher, args.tiny, args.jobs)
    if not horizons:
        return sweep_and_report(args, methods, seeds, sweep_dir, group, launcher, overrides)

    def one_horizon(sub: Path, h: int, *cell: str) -> int:
        extra = horizon_overrides(h, args.overrides, args.tiny)
        return sweep_and_report(args, methods, seeds, sub, group, launcher, [*overrides, *cell, *extra])
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
