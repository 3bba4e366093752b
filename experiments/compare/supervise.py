"""The compare job's sweep as a supervised subprocess: :func:`run_sweep` runs a command in a
process group of its own, echoes its output live (Hydra's schema notice filtered out,
:class:`NoticeFilter`) and into ``<sweep>/sweep.log``, and on Ctrl-C or SIGTERM stops the whole
group (:func:`stop_group`), the launcher's worker processes included.

Why a subprocess and not Hydra's Python API: ``hydra.compose`` cannot run a multirun or a
launcher; calling ``@hydra.main`` in-process means faking ``sys.argv`` and sharing Hydra's global
state with this process. The subprocess is exactly the command a user would type (printed, so any
sweep can be re-run or extended by hand), keeps each sweep's state isolated, and lets the job set
the environment of every run (:data:`SWEEP_ENV`: one BLAS thread per job, W&B offline).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

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
#: Seconds the sweep's processes get to stop after SIGTERM before the rest of its group is killed.
STOP_GRACE_SECONDS = 20.0

_SCHEMA_NOTICE = re.compile(r"^'hydra/launcher/\w+' is validated against ConfigStore schema")


class NoticeFilter:
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


def run_sweep(cmd: Sequence[str], sweep_dir: Path, env: dict[str, str] | None = None) -> int:
    """Run ``cmd``, echoing its output live and into ``<sweep>/sweep.log``; its exit code.

    The command runs in a session (process group) of its own, and Ctrl-C or SIGTERM to this process
    stops all of it, the launcher's worker processes included (:func:`stop_group`): each run stops as
    on Ctrl-C, with its last update's checkpoint on disk, so re-running resumes; no worker is left
    holding a warm-start lock."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, **SWEEP_ENV, **(env or {})}
    echo = NoticeFilter()
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


__all__ = ["STOP_GRACE_SECONDS", "SWEEP_ENV", "NoticeFilter", "run_sweep", "stop_group"]
