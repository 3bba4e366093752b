"""The sampler process of ``rollout.mode=async``: rollouts collected beside the trainer.

With staleness ``k >= 1`` (``rollout.staleness``) and version ``v`` = the policy after ``v``
updates, the rollouts update ``u`` trains on (batch ``u``) are sampled with version
``max(0, u - k)``: the version the simulated lag of ``rollout.mode=sync`` samples them with
(``experiments.runtime.behavior.BehaviorPolicy``), from the same request and sampling streams
(``update_requests``, ``sampling_generator``), so for one seed both modes collect the same
batches; only the wall clock differs. While the trainer computes update ``t`` the sampler
collects batch ``t + 1`` (version ``t + 1 - k <= t``, already published), and it runs at most
``k + 1`` batches ahead: it waits for the version it needs rather than sample with another one.

Weights travel through shared memory: ``k + 1`` slots of the policy's checkpoint tensors
(``experiments.runtime.adapters.policy_tensors``), version ``v`` in slot ``v mod (k + 1)``, and a
table of the version each slot holds, guarded by one condition. The trainer writes version
``v + 1`` after update ``v``; while the sampler reads version ``u - k`` for batch ``u`` the trainer
can at most be writing version ``u`` (update ``u`` needs batch ``u``), whose slot differs for
``k >= 1``, so a slot is never written while it is read. Batches come back through a queue as
:class:`SampledBatch`.

Failure and resume: the sampler exits when its parent is gone (checked each second it waits and
before each batch) or when asked to stop; the trainer raises :class:`SamplerDied` (one line, the
exit code) when the sampler dies. The run's checkpoint is the trainer's, written after each
update, so rerunning the command resumes there: batches sampled ahead but not trained are sampled
again from their streams, none is lost or trained twice.

Test aid (not a config field): with the environment variable ``AGENTRL_TEST_KILL_SAMPLER_AT=N``
the sampler SIGKILLs itself after collecting batch ``N``, before handing it over.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import time
from dataclasses import dataclass

import torch
import torch.multiprocessing as mp

from experiments.runtime.adapters import load_policy_tensors
from experiments.runtime.build import build_policy, sampling_generator, train_engine, update_requests
from experiments.runtime.schema import TrainConfig

KILL_SAMPLER_ENV = "AGENTRL_TEST_KILL_SAMPLER_AT"
POLL_SECONDS = 1.0


class SamplerDied(RuntimeError):
    """The sampler process ended while the trainer waited for a batch."""


@dataclass(frozen=True)
class SampledBatch:
    """Batch ``update``'s ``trajectories``, sampled with policy ``version``: the sampler's seconds
    collecting it and waiting for that version's weights before it."""

    update: int
    version: int
    trajectories: list
    sample_seconds: float
    wait_seconds: float


def needed_version(update: int, staleness: int) -> int:
    """The policy version batch ``update`` is sampled with: ``max(0, update - staleness)``."""
    return max(0, update - staleness)


def torch_dtype(name: str) -> torch.dtype:
    """``rollout.sampler_dtype``'s torch dtype."""
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[name]


@dataclass
class _Shared:
    """What both processes hold: the weight slots, the version each holds, their condition."""

    slots: list[dict]
    versions: object  # multiprocessing Array('q'): slot -> version held (-1: none yet)
    cond: object
    stop: object

    def slot_holds(self, version: int) -> bool:
        return self.versions[version % len(self.slots)] == version


def _wait_for(sh: _Shared, version: int) -> bool:
    """Block until ``version``'s weights are in their slot; False when asked to stop or orphaned."""
    with sh.cond:
        while not sh.slot_holds(version):
            if sh.stop.is_set() or not _parent_alive():
                return False
            sh.cond.wait(POLL_SECONDS)
    return True


def _parent_alive() -> bool:
    parent = mp.parent_process()
    return parent is None or parent.is_alive()


def _kill_if_test_asks(update: int) -> None:
    if str(update) == os.environ.get(KILL_SAMPLER_ENV, ""):
        os.kill(os.getpid(), signal.SIGKILL)  # the batch is collected and not handed over


def sampler_main(c: TrainConfig, start_path: str, sh: _Shared, out, first_update: int) -> None:
    """The sampler process: batches ``first_update, first_update + 1, ...`` into ``out``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer stops it
    out.cancel_join_thread()  # exiting never waits on batches nobody will read
    torch.set_num_threads(1)
    model = build_policy(c, start_path)[0].to(torch_dtype(c.rollout.sampler_dtype)).eval()
    engine = train_engine(c)
    k, update = c.rollout.staleness, first_update
    while not sh.stop.is_set() and _parent_alive():
        version = needed_version(update, k)
        t0 = time.perf_counter()
        if not _wait_for(sh, version):
            break
        waited = time.perf_counter() - t0
        load_policy_tensors(model, sh.slots[version % (k + 1)])
        t1 = time.perf_counter()
        trajs = engine.collect(model, update_requests(c, update), policy_version=version,
                               generator=sampling_generator(c, update))
        _kill_if_test_asks(update)
        out.put(SampledBatch(update, version, trajs, time.perf_counter() - t1, waited))
        update += 1
    engine.close()


class AsyncSampler:
    """``AsyncSampler(c, start_path, versioned, first_update)``: starts the sampler process at
    batch ``first_update`` with the weight slots filled from ``versioned`` (``(version, tensors)``
    pairs: ``BehaviorPolicy.versioned()``); :meth:`publish` after each update, :meth:`get` for
    each batch, :meth:`close` at the end."""

    def __init__(self, c: TrainConfig, start_path: str, versioned: list[tuple[int, dict]], first_update: int) -> None:
        ctx = mp.get_context("spawn")
        k = c.rollout.staleness
        template = versioned[0][1]
        slots = [{name: t.detach().clone().share_memory_() for name, t in template.items()} for _ in range(k + 1)]
        self.sh = _Shared(slots, ctx.Array("q", [-1] * (k + 1)), ctx.Condition(), ctx.Event())
        for version, tensors in versioned:
            self.publish(version, tensors)
        self.out = ctx.Queue()
        self.proc = ctx.Process(target=sampler_main, args=(c, start_path, self.sh, self.out, first_update),
                                daemon=not mp.current_process().daemon, name="agentrl-sampler")
        self.proc.start()
        atexit.register(self.close)

    def publish(self, version: int, tensors: dict) -> None:
        """Write version ``version``'s weights into its slot and wake the sampler."""
        slot = version % len(self.sh.slots)
        with self.sh.cond:
            for name, t in self.sh.slots[slot].items():
                t.copy_(tensors[name])
            self.sh.versions[slot] = version
            self.sh.cond.notify_all()

    def get(self, update: int) -> tuple[SampledBatch, float]:
        """Batch ``update`` and the seconds the trainer waited for it (:class:`SamplerDied` when
        the sampler is gone)."""
        t0 = time.perf_counter()
        while True:
            try:
                batch = self.out.get(timeout=POLL_SECONDS)
            except queue.Empty:
                if not self.proc.is_alive():
                    raise SamplerDied(f"the sampler process ended (exit code {self.proc.exitcode}) before batch "
                                      f"{update}; re-run the same command to resume from the last checkpoint") from None
                continue
            if batch.update != update:
                raise SamplerDied(f"the sampler handed over batch {batch.update} where {update} was due")
            return batch, time.perf_counter() - t0

    def close(self) -> None:
        """Stop the sampler process (killed after a second: what it holds is sampled again on resume)."""
        if self.proc is None:
            return
        self.sh.stop.set()
        with self.sh.cond:
            self.sh.cond.notify_all()
        self.proc.join(timeout=POLL_SECONDS)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.out.cancel_join_thread()
        self.proc = None
        atexit.unregister(self.close)


__all__ = ["AsyncSampler", "KILL_SAMPLER_ENV", "SampledBatch", "SamplerDied", "needed_version", "torch_dtype"]
