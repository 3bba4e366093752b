"""experiments.compare.supervise.run_sweep stops the WHOLE sweep on SIGTERM / Ctrl-C: the launcher's worker
processes too (a loky worker left running held the warm-start lock and stalled the next demo)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# the "sweep": starts a worker (a grandchild of the compare process) that would sleep for 10
# minutes, prints its pid, then waits like a launcher
SWEEP = ("import subprocess, sys, time; "
         "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
         "print('worker', w.pid, flush=True); time.sleep(600)")
# the compare process as started from a terminal: Ctrl-C raises KeyboardInterrupt. (A shell's
# background job inherits SIGINT ignored, and Python then installs no handler of its own; the test
# must not depend on how the suite itself was launched.)
DRIVER = ("import signal, sys; from pathlib import Path; from experiments.compare.supervise import run_sweep; "
          "signal.signal(signal.SIGINT, signal.default_int_handler); "
          f"sys.exit(run_sweep([sys.executable, '-c', {SWEEP!r}], Path(sys.argv[1])))")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_compare_stops_every_process_of_the_sweep(tmp_path, sig):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path)], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "sweep.log"
    deadline = time.monotonic() + 60
    worker = None
    while worker is None and time.monotonic() < deadline:
        lines = log.read_text().splitlines() if log.exists() else []
        worker = next((int(x.split()[1]) for x in lines if x.startswith("worker ")), None)
        time.sleep(0.1)
    assert worker is not None and alive(worker), "the fake sweep never started its worker"
    driver.send_signal(sig)
    driver.wait(timeout=60)
    assert driver.returncode != 0  # interrupted, not a finished sweep
    deadline = time.monotonic() + 30
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    still = alive(worker)
    if still:
        os.kill(worker, signal.SIGKILL)
    assert not still, "the sweep's worker outlived the compare process"
