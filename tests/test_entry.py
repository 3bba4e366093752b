"""tests/entry.py: an in-process ``python -m`` / ``python script`` run returns what a subprocess
would (exit code, stdout, stderr) and leaves nothing behind for the tests after it."""

from __future__ import annotations

import logging
import os
import random
import signal
import sys
import textwrap

import numpy as np
import pytest
import torch

import entry
from entry import ROOT, run_entry, run_script, sweep_in_process

#: A script that changes every piece of process state run_entry promises to put back, then exits
#: with the code given as its first argument (or raises when it is "raise").
PROBE = textwrap.dedent('''
    import logging, logging.config, os, random, signal, sys, warnings
    import numpy as np, torch
    print("out", sys.argv[1:], os.getcwd(), os.environ.get("PROBE_VAR"), __name__)
    print("err", file=sys.stderr)
    warnings.warn("probe warning")
    os.chdir("/")
    os.environ["PROBE_LEAK"] = "1"
    sys.argv.append("leak")
    torch.set_num_threads(3)
    torch.manual_seed(123); random.seed(123); np.random.seed(123)
    signal.signal(signal.SIGTERM, lambda *a: None)
    logging.getLogger("probe.before").info("x")
    logging.config.dictConfig({"version": 1, "root": {"level": "ERROR"}, "disable_existing_loggers": True})
    if sys.argv[1] == "raise":
        raise RuntimeError("probe failed")
    sys.exit(int(sys.argv[1]) if sys.argv[1].isdigit() else sys.argv[1])
''')


def _state():
    lg = logging.getLogger("probe.before")
    return (os.getcwd(), dict(os.environ), list(sys.argv), torch.get_num_threads(), torch.get_rng_state(),
            random.getstate(), np.random.get_state()[1].tolist(), signal.getsignal(signal.SIGTERM),
            logging.root.level, list(logging.root.handlers), lg.disabled)


@pytest.mark.parametrize("arg, code", [("0", 0), ("3", 3), ("a message", 1), ("raise", 1)])
def test_a_script_gets_argv_cwd_env_and_everything_is_put_back(tmp_path, arg, code):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    logging.getLogger("probe.before")  # exists before the run: the probe's dictConfig disables it
    before = _state()
    done = run_script(script, [arg], cwd=tmp_path, env={**os.environ, "PROBE_VAR": "v"})
    after = _state()
    assert done.returncode == code, done.stderr
    assert done.stdout == f"out {[arg]!r} {tmp_path} v __main__\n"
    assert done.stderr.startswith("err\n") and "UserWarning: probe warning" in done.stderr
    if arg == "a message":
        assert done.stderr.rstrip().endswith("a message")  # SystemExit("...") prints it, exit 1
    if arg == "raise":
        assert "Traceback" in done.stderr and done.stderr.rstrip().endswith("RuntimeError: probe failed")
    assert before[:4] == after[:4]  # cwd, environment (PROBE_LEAK gone), argv, torch threads
    assert torch.equal(before[4], after[4]) and before[5:] == after[5:]  # RNGs, SIGTERM, logging


def test_the_project_root_is_on_the_pythonpath_of_the_run(tmp_path):
    script = tmp_path / "p.py"
    script.write_text("import os; print(os.environ['PYTHONPATH'].split(os.pathsep)[0])")
    done = run_script(script, env={"PATH": os.environ.get("PATH", "")})  # env replaces the environment
    assert done.returncode == 0 and done.stdout.strip() == str(ROOT)


def test_a_hydra_entry_point_in_process_leaves_hydra_free_for_the_next_test(tmp_path):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    level = logging.root.level
    # a config error: experiments.train validates before any compute, exits 2 with one line
    done = run_entry("experiments.train", ["algo=grpo", "algo.group_size=1", f"run_dir={tmp_path / 'r'}"], cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().startswith("config error: algo.group_size=1")
    assert not GlobalHydra.instance().is_initialized() and logging.root.level == level
    assert not (tmp_path / "r").exists()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        assert compose(config_name="config", overrides=["algo=ppo"]).algo.name == "ppo"


def test_a_sweep_in_process_logs_echoes_and_returns_the_command_exit_code(tmp_path):
    """``sweep_in_process`` stands in for ``run_sweep``: the ``$ cmd`` line and the command's output
    in ``<sweep>/sweep.log``, the output echoed, its exit code returned (``py_compile`` of a
    missing file exits 1 with the error on stderr); ``run_entry(sweeps_in_process=True)`` swaps
    it in for the run only."""
    import platform

    from experiments.compare import job

    sweep = tmp_path / "sweep"
    cmd = [sys.executable, "-m", "platform"]
    assert sweep_in_process(cmd, sweep) == 0
    assert sweep_in_process([sys.executable, "-m", "py_compile", str(tmp_path / "missing.py")], sweep) == 1
    log = (sweep / "sweep.log").read_text().splitlines()
    assert log[0] == "$ " + " ".join(cmd) and log[1] == platform.platform()
    assert log[2].startswith("$ ") and "No such file" in "\n".join(log[3:])
    with pytest.raises(ValueError, match="not a `python -m module"):
        sweep_in_process([sys.executable, "x.py"], sweep)

    original = job.run_sweep
    with entry._sweeps_in_process():
        assert job.run_sweep is sweep_in_process
    assert job.run_sweep is original
    out = run_entry("platform", [], sweeps_in_process=True)
    assert out.returncode == 0 and out.stdout.strip() == platform.platform() and job.run_sweep is original
