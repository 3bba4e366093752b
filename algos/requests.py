"""Rollout requests: what one trajectory to generate is (``RolloutRequest``: task options, seed,
GRPO group; forced tokens and a tool re-seed for branching an episode) and a run's requests of
``n_tasks`` task instances x ``group_size`` rollouts (``make_requests``). The rollout engine
(``algos.rollout.RolloutEngine``) generates one result per request."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class RolloutRequest:
    """One trajectory to generate: reset ``options`` (task instance) and ``seed``; ``group_id``
    ties the G members of a GRPO group (same options, different seeds).

    Branching an episode (``experiments.value_ceiling``): ``forced`` token ids are fed as the
    episode's first generated tokens instead of sampling (the sampled tokens of an earlier
    trajectory with the same ``options`` and ``seed``, so the env replays it exactly), then
    sampling continues; ``reseed`` (None: keep the stream) re-seeds the env's future tool
    latencies and faults (``algos.rollout.reseed_tools``) just before the first token that is sampled, so
    branches of one state differ in the env's randomness as well as in the policy's. On an env
    without a tool stream (``algos.rollout.has_tool_stream`` False) ``reseed`` must be None: its branches differ
    in the policy's samples only (every slot draws its own uniforms from ``collect``'s generator
    once its forced tokens are used up). Forced tokens are recorded like sampled ones (a branch is
    for measurement, never for training)."""

    options: dict | None
    seed: int
    group_id: int = 0
    forced: tuple[int, ...] = ()
    reseed: int | None = None


def make_requests(
    n_tasks: int,
    group_size: int,
    seed: int,
    split: str = "train",
    task_indices: list[int] | None = None,
    n_task_pool: int | None = None,
    rng: torch.Generator | None = None,
) -> list[RolloutRequest]:
    """``n_tasks`` task instances x ``group_size`` rollouts each. Task indices are given, or drawn
    from ``range(n_task_pool)`` with ``rng``; member ``g`` of group ``k`` gets seed
    ``seed * 1_000_003 + k * 1_009 + g`` (different seeds, same options)."""
    if task_indices is None:
        if n_task_pool is None:
            raise ValueError("make_requests needs task_indices or n_task_pool")
        task_indices = torch.randint(n_task_pool, (n_tasks,), generator=rng).tolist()
    reqs = []
    for k, ti in enumerate(task_indices):
        for g in range(group_size):
            reqs.append(RolloutRequest(options={"task_index": int(ti), "split": split},
                                       seed=(seed * 1_000_003 + k * 1_009 + g) % (2**31 - 1), group_id=k))
    return reqs


__all__ = ["RolloutRequest", "make_requests"]
