"""Behaviour cloning of the policy on demonstrations (the warm start's step 2), on one process or
data-parallel on several.

    losses = behaviour_clone(model, trajectories, epochs, lr, batch_rows, seed, processes=1)

Loss: cross-entropy on the demo's action tokens (``action_mask = 1``), token mean per minibatch:

    L(B) = - sum_{(b, t) in B, mask = 1} log pi(a_(b,t) | prefix) / #{(b, t) in B : mask = 1}

Minibatches: ``batch_rows`` rows drawn by ``torch.randperm`` (one permutation per epoch, from
``torch.Generator().manual_seed(seed)``); one AdamW step per minibatch (linear warm-up over
``min(20, steps // 10)`` steps, then linear decay to 10 %; gradient norm clipped at 1). Each
minibatch is computed as length-bucketed micro-batches (``bc_micro_batches``: rows of near-equal
length, each trimmed to its own longest row, ``algos.batch.length_buckets``) whose losses are
summed over the whole minibatch's action tokens before the step: the same loss and gradient as one
padded forward of the minibatch with fewer padded positions. Logits only before the action tokens
(``PolicyModel.forward_at``).

``processes = P > 1``: data parallel (``torch.distributed``, gloo, P - 1 spawned workers plus the
caller as rank 0, one torch thread each). Every rank holds the same model; a minibatch's rows are
sorted by ``(length, index)`` and rank ``r`` takes rows ``r, r + P, ...`` (near-equal work), the
rank's gradients of its share of ``L(B)`` are summed over ranks (``all_reduce``) before the same
clipped step on every rank. The sum of the shares is ``L(B)``, so the result equals the
one-process one up to float summation order (``tests/experiments/test_warmstart.py``), and it is
deterministic for a given ``P``, which is why ``warmstart.processes`` is part of the warm start's
cache key. It pays where a core would otherwise idle: a sweep's other jobs wait on the warm start's
lock while it is built. A worker ends with ``os._exit`` once its group is destroyed (``_exit_worker``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from algos.batch import budget_buckets, collate, row_lengths
from algos.policy import token_logprobs


@dataclass(frozen=True)
class BCData:
    """What BC reads of a collated batch (``algos.batch.collate``): ``tokens [R, T]``, the real
    length of each row ``lengths [R]`` and ``action_mask [R, T]`` (1 on the demo's action tokens)."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    action_mask: torch.Tensor

    @classmethod
    def of(cls, trajs: list) -> "BCData":
        batch = collate(trajs)
        return cls(batch.tokens, row_lengths(batch), batch.action_mask)

    @property
    def num_rows(self) -> int:
        return int(self.tokens.shape[0])


def bc_micro_batches(lengths: torch.Tensor, idx: torch.Tensor, max_tokens: int | None = None,
                     tokens: torch.Tensor | None = None, share_prefix: bool = False) -> list[torch.Tensor]:
    """The rows ``idx`` of one BC minibatch split into length buckets (``algos.batch.
    budget_buckets`` over ``lengths[idx]``, at most ``len(idx)`` rows and, with ``max_tokens``,
    at most that many padded positions each; with ``share_prefix`` and the batch's ``tokens``,
    the ids the rows begin with count once, as the model's forward computes them once), as row
    indices of the batch. Their union is ``idx``; each is forwarded trimmed to its own longest row."""
    if len(idx) == 0:
        return []
    rows = None if tokens is None else tokens[idx]
    return [idx[s] for s in budget_buckets(rows, lengths[idx], len(idx), max_tokens, share_prefix)]


def rank_share(lengths: torch.Tensor, idx: torch.Tensor, rank: int, world: int) -> torch.Tensor:
    """Rank ``rank``'s rows of the minibatch ``idx`` among ``world`` ranks: the rows sorted by
    ``(length, index)``, every ``world``-th from position ``rank``. The shares partition ``idx``."""
    if world == 1:
        return idx
    order = sorted(idx.tolist(), key=lambda i: (int(lengths[i]), i))
    return torch.tensor(order[rank::world], dtype=torch.long)


def _bc_loop(model: nn.Module, batch: BCData, epochs: int, lr: float, batch_rows: int, seed: int,
             max_tokens: int | None = None, bucketed: bool = True, rank: int = 0, world: int = 1) -> list[float]:
    """The BC loop of the module docstring on rank ``rank`` of ``world`` (``world > 1``: the
    process group is initialised). ``bucketed=False``: one padded forward per minibatch, rows in
    the permutation's order. Returns the minibatch losses ``L(B)``."""
    lengths, shared = batch.lengths, bool(getattr(model, "share_prefix", False))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    r = batch.num_rows
    steps = epochs * ((r + batch_rows - 1) // batch_rows)
    warm = max(1, min(20, steps // 10))  # linear warm-up, then linear decay to 10 %
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.1, 1 - s / max(steps, 1)))
    losses: list[float] = []
    model.train()
    for _ in range(epochs):
        perm = torch.randperm(r, generator=gen)
        for idx in perm.split(batch_rows):
            n_tokens = batch.action_mask[idx].sum().clamp(min=1)
            opt.zero_grad(set_to_none=True)
            total = torch.zeros(())
            share = rank_share(lengths, idx, rank, world)
            for rows in (bc_micro_batches(lengths, share, max_tokens, batch.tokens, shared) if bucketed else [share]):
                width = int(lengths[rows].max())
                tokens = batch.tokens[rows][:, :width]
                mask = batch.action_mask[rows][:, :width]
                want = mask > 0
                logits, _ = model.forward_at(tokens, want)
                lp = token_logprobs(logits, tokens, want)[0]
                loss = -(lp * mask).sum() / n_tokens
                loss.backward()
                total += loss.detach()
            if world > 1:
                flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
                                 + [total.reshape(1)])
                dist.all_reduce(flat, op=dist.ReduceOp.SUM)
                offset = 0
                for p in params:
                    n = p.numel()
                    p.grad = flat[offset:offset + n].view_as(p).clone()
                    offset += n
                total = flat[-1]
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(float(total))
    model.eval()
    return losses


def _init_group(rank: int, world: int, rendezvous: str) -> None:
    # a rank that never arrives (a worker that failed to start) is an error after 5 minutes, not a hang
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))


def _worker(job: str) -> None:
    """A spawned rank (1 .. world - 1), from the job file the caller wrote: the same loop on a copy
    of the model; its result is rank 0's, so nothing is returned."""
    torch.set_num_threads(1)
    spec = torch.load(job, weights_only=False)
    _init_group(spec["rank"], spec["world"], spec["rendezvous"])
    try:
        model = spec["model"]
        _bc_loop(model, spec["batch"], *spec["args"], True, spec["rank"], spec["world"])
    finally:
        dist.destroy_process_group()


def _exit_worker(job: str) -> None:
    """Run the worker of ``job``, then end the process without interpreter finalization: its
    result went to rank 0 by the collectives, and the C++ destructors that finalization runs can
    find a gloo thread still joinable and call ``std::terminate`` (SIGABRT, exit -6), which would
    report a finished rank as failed. An exception in the worker propagates (a non-zero exit)."""
    _worker(job)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def behaviour_clone(model: nn.Module, trajs: list, epochs: int, lr: float, batch_rows: int, seed: int,
                    processes: int = 1, bucketed: bool = True, max_tokens: int | None = None) -> list[float]:
    """Behaviour-clone ``model`` in place on the trajectories ``trajs`` (module docstring); returns
    the minibatch losses. ``bucketed=False`` (one process only): one padded forward per minibatch,
    the computation of the checkpoints cached before the micro-batches (the two-agent warm start
    keeps it, see ``experiments.runtime.pair.warmstart_key``). ``processes`` > 1 runs data parallel:
    rank 0 is this process, ranks 1 .. P - 1 are fresh interpreters (``python -m experiments.runtime.bc
    JOB``; a subprocess, not ``multiprocessing``, so that it also works inside a joblib / loky
    sweep worker). ``max_tokens``: the token budget of a micro-batch (``policy.micro_batch_tokens``),
    which bounds the activations one forward and backward hold."""
    if processes < 1:
        raise ValueError(f"processes={processes} invalid; allowed: an int >= 1")
    batch = BCData.of(trajs)
    args = (epochs, lr, batch_rows, seed, max_tokens)
    if processes == 1:
        return _bc_loop(model, batch, *args, bucketed)
    if not bucketed:
        raise ValueError(f"bucketed=False with processes={processes} invalid; allowed: processes=1")
    with tempfile.TemporaryDirectory(prefix="bc-") as tmp:
        rendezvous = str(Path(tmp) / "rendezvous")
        workers = []
        for rank in range(1, processes):
            job = Path(tmp) / f"rank{rank}.pt"
            torch.save({"rank": rank, "world": processes, "rendezvous": rendezvous, "model": model,
                        "batch": batch, "args": args}, job)
            workers.append(subprocess.Popen([sys.executable, "-m", "experiments.runtime.bc", str(job)],
                                            cwd=str(Path(__file__).resolve().parents[2])))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _init_group(0, processes, rendezvous)
            try:
                losses = _bc_loop(model, batch, *args, True, 0, processes)
            finally:
                dist.destroy_process_group()
        finally:
            torch.set_num_threads(threads)
            codes = [w.wait() for w in workers]
        if any(codes):
            raise RuntimeError(f"behaviour cloning worker exited with code {next(c for c in codes if c)}")
    return losses


__all__ = ["BCData", "bc_micro_batches", "behaviour_clone", "rank_share"]


if __name__ == "__main__":
    _exit_worker(sys.argv[1])
