"""A SIGTERM that arrives while an update's checkpoint is being written stops the run after the
write: the checkpoint on disk is whole and holds that update (``experiments.runtime.loop``)."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from experiments.runtime import loop
from experiments.runtime.config import compose_config, validate
from experiments.runtime.rundir import RunDir


def test_sigterm_during_the_checkpoint_write_stops_after_it(tmp_path, monkeypatch, shared_warmstart_cache):
    c = validate(compose_config(["experiment=tiny", f"run_dir={tmp_path / 'run'}", "logger=none",
                                 f"warmstart.cache_dir={shared_warmstart_cache}"]))
    write = RunDir.save_checkpoint

    def signalled_write(self, state):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives before the file is written
        write(self, state)

    monkeypatch.setattr(RunDir, "save_checkpoint", signalled_write)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SystemExit) as stopped:
            loop.run(c)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stopped.value.code == 130
    saved = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=False)
    assert saved["update"] == 1  # the first update's checkpoint was written whole, then the run stopped


def test_sigterm_outside_the_write_stops_at_once():
    stop = loop.SigtermStop()
    with pytest.raises(KeyboardInterrupt):
        stop.handler(signal.SIGTERM, None)
    with pytest.raises(KeyboardInterrupt):
        with stop.deferred():
            stop.handler(signal.SIGTERM, None)  # deferred: nothing raised here
            assert stop.pending
