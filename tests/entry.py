"""Run ``python -m <module> <argv...>`` (:func:`run_entry`) or ``python <script> <argv...>``
(:func:`run_script`) inside the test process.

A subprocess per entry-point test pays ~6-7 s of imports (torch, torch._dynamo, Hydra) before
doing anything; a pytest worker has paid them once. :func:`run_entry` executes the module as
``__main__`` (``runpy.run_module``, what ``python -m`` does; ``runpy.run_path`` for a script) with
the process state a fresh interpreter would see patched in, and puts back afterwards everything a
run may change:

- ``sys.argv`` (``[<module or script file>, *argv]``), the working directory, ``os.environ``
  (``env`` is the whole environment, as ``subprocess.run``'s ``env``; None keeps this process's);
  the project root is prepended to ``PYTHONPATH`` so subprocesses the run starts import this checkout;
- ``sys.stdout`` / ``sys.stderr`` captured as text; warnings raised during the run are printed to
  that ``stderr`` (as a subprocess would) instead of reaching pytest's summary;
- the exit code: ``SystemExit`` -> its code (``None`` -> 0, a message -> 1 with the message on
  stderr), any other exception -> 1 with its traceback on stderr, a normal return -> 0;
- Hydra: ``GlobalHydra`` cleared before and after (a later ``initialize_config_dir`` would refuse
  an initialized one) and ``HydraConfig`` put back; the logging configuration (Hydra's
  ``job_logging: disabled`` sets the root level to ERROR and disables existing loggers);
- torch's intra-op thread count and the global RNG states of ``random``, ``numpy`` and ``torch``;
- the SIGTERM / SIGINT handlers (experiments.train installs one for SIGTERM).

With ``sweeps_in_process=True`` the compare job's sweep (``experiments.compare.job.run_sweep``:
a ``python -m experiments.train -m ...`` subprocess in its own session) runs the same command
in this process too (:func:`sweep_in_process`: its output into ``<sweep>/sweep.log`` and, echo
filter applied, onto the job's stdout; its exit code), for tests of what a compare command builds
and reports; ``run_sweep``'s process group and signal handling are the subject of
tests/experiments/test_compare_stop.py and the plain compare end-to-end test, which keep it.

Not isolated (keep a real subprocess for these): a run that kills its own process
(``AGENTRL_TEST_KILL_AFTER_UPDATE``), anything that depends on a fresh interpreter (another
``PYTHONHASHSEED``, "torch is not imported", a child's RSS), and Hydra multiruns with the joblib or
Ray launcher when the launcher is what the test is about.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import random
import runpy
import signal
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class EntryResult:
    """What ``subprocess.run(..., capture_output=True, text=True)`` would have returned."""

    returncode: int
    stdout: str
    stderr: str


def run_entry(module: str, argv: Sequence[str] = (), cwd: str | os.PathLike | None = None,
              env: Mapping[str, str] | None = None, sweeps_in_process: bool = False) -> EntryResult:
    """``python -m module *argv`` in this process, from ``cwd`` (None: the current one) with the
    environment ``env`` (None: this process's), like ``subprocess.run([sys.executable, "-m",
    module, *argv], cwd=cwd, env=env, capture_output=True, text=True)``; see the module docstring
    for what is captured and what is put back (and for ``sweeps_in_process``)."""
    def call():
        with _sweeps_in_process() if sweeps_in_process else contextlib.nullcontext():
            runpy.run_module(module, run_name="__main__", alter_sys=True)

    return _run_main(call, module, argv, cwd, env)


def sweep_in_process(cmd: Sequence[str], sweep_dir: Path, env: Mapping[str, str] | None = None) -> int:
    """``experiments.compare.job.run_sweep(cmd, sweep_dir, env)`` with ``cmd`` (``python -m module
    *argv``) run by :func:`run_entry` in this process, in the sweep environment
    (``experiments.compare.supervise.SWEEP_ENV``); the output is appended to ``<sweep>/sweep.log`` after the ``$ cmd`` line
    (stdout, then stderr) and echoed through the job's filter. Returns the exit code."""
    from experiments.compare import supervise

    if list(cmd[1:2]) != ["-m"]:
        raise ValueError(f"not a `python -m module ...` command: {cmd}")
    sweep_dir = Path(sweep_dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    done = run_entry(cmd[2], cmd[3:], env={**os.environ, **supervise.SWEEP_ENV, **(env or {})})
    text = done.stdout + done.stderr
    with open(sweep_dir / "sweep.log", "a") as log:
        log.write("$ " + " ".join(cmd) + "\n" + text)
    echo = supervise.NoticeFilter()
    sys.stdout.write("".join(echo(line) for line in text.splitlines(keepends=True)))
    return done.returncode


@contextlib.contextmanager
def _sweeps_in_process() -> Iterator[None]:
    from experiments.compare import job

    saved = job.run_sweep
    job.run_sweep = sweep_in_process
    try:
        yield
    finally:
        job.run_sweep = saved


def run_script(path: str | os.PathLike, argv: Sequence[str] = (), cwd: str | os.PathLike | None = None,
               env: Mapping[str, str] | None = None) -> EntryResult:
    """``python path *argv`` in this process (``runpy.run_path``; its directory first on
    ``sys.path`` while it runs, as for a script), otherwise as :func:`run_entry`."""
    path = str(path)

    def call():
        sys.path.insert(0, str(Path(path).resolve().parent))
        try:
            runpy.run_path(path, run_name="__main__")
        finally:
            sys.path.pop(0)

    return _run_main(call, path, argv, cwd, env)


def _run_main(call, argv0: str, argv: Sequence[str], cwd, env: Mapping[str, str] | None) -> EntryResult:
    stdout, stderr = io.StringIO(), io.StringIO()

    def show(message, category, filename, lineno, file=None, line=None):
        if "found in sys.modules after import of package" in str(message):
            return  # runpy re-executing an imported module: expected here, not in a user's run
        stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with _restored_state(), _patched_process(argv0, argv, cwd, env), _hydra_cleared():
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            warnings.showwarning = show  # on stderr where it is raised, as in a subprocess
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = _exit_code(call)
    return EntryResult(code, stdout.getvalue(), stderr.getvalue())


def _exit_code(call) -> int:
    try:
        call()
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except Exception:  # noqa: BLE001  (a subprocess would print the traceback and exit 1)
        traceback.print_exc(file=sys.stderr)
        return 1
    return 0


@contextlib.contextmanager
def _patched_process(argv0: str, argv: Sequence[str], cwd, env: Mapping[str, str] | None) -> Iterator[None]:
    saved_argv, saved_cwd, saved_env = list(sys.argv), os.getcwd(), dict(os.environ)
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        sys.argv = [argv0, *argv]  # run_module replaces argv[0] with the module's file, as `python -m` does
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)


@contextlib.contextmanager
def _hydra_cleared() -> Iterator[None]:
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    saved = HydraConfig.instance().cfg
    GlobalHydra.instance().clear()
    try:
        yield
    finally:
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = saved


@contextlib.contextmanager
def _restored_state() -> Iterator[None]:
    """Threads, RNGs, signal handlers and logging as they were before the block (torch is
    imported here if it is not yet: under pytest the test modules have imported it already)."""
    import numpy as np
    import torch

    threads, torch_rng = torch.get_num_threads(), torch.get_rng_state()
    py_rng, np_rng = random.getstate(), np.random.get_state()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    logs = _logging_state()
    try:
        yield
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        random.setstate(py_rng)
        np.random.set_state(np_rng)
        torch.set_num_threads(threads)
        torch.set_rng_state(torch_rng)
        _set_logging_state(logs)


def _logging_state() -> dict:
    manager = logging.Logger.manager
    loggers = {name: lg for name, lg in manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    return {
        "disable": manager.disable,
        "root": (logging.root.level, list(logging.root.handlers), logging.root.disabled),
        "loggers": {name: (lg.level, list(lg.handlers), lg.disabled, lg.propagate) for name, lg in loggers.items()},
    }


def _set_logging_state(state: dict) -> None:
    logging.disable(state["disable"])
    level, handlers, disabled = state["root"]
    logging.root.setLevel(level)
    logging.root.handlers[:] = handlers
    logging.root.disabled = disabled
    for name, lg in logging.Logger.manager.loggerDict.items():
        if not isinstance(lg, logging.Logger):
            continue
        if name in state["loggers"]:
            level, handlers, disabled, propagate = state["loggers"][name]
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.disabled, lg.propagate = disabled, propagate
        else:  # created during the run (an import): as a fresh import leaves it, not disabled
            lg.disabled = False
