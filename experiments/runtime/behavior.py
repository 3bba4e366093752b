"""The behaviour policy: which weights sample the training rollouts.

Synchronous mode (``staleness = 0``): the learner's own policy samples, version = updates done.
Asynchronous mode (``staleness = k > 0``, simulating a rollout fleet that lags the learner): the
sampler holds the last ``k + 1`` policy snapshots and samples with the oldest, i.e. the policy
``k`` updates old (or the start model while fewer than ``k`` updates are done). Its version
``v = updates - (snapshots - 1)`` is what the rollouts record as ``policy_version``; the
behaviour log-probs come from it, while the trainer's old log-probs are recomputed with the
current weights, so the two differ exactly when ``v < updates``.

A snapshot holds what a checkpoint holds of the policy's weights
(``experiments.runtime.adapters.policy_tensors``): the full state dict, or for a partly frozen
policy (LoRA on a frozen base) its trainable parameters only; the sampler's frozen entries are
the policy's, copied once, and never change.

Sampler dtype (``rollout.sampler_dtype``): with ``bfloat16`` the sampler is a copy of the policy
cast to bfloat16 (also at staleness 0), loaded with the weights it samples with before each
collection, so the behaviour log-probs come from a bfloat16 forward while the trainer's old
log-probs stay float32, as with an inference engine beside a float32 trainer.

In ``rollout.mode=async`` the snapshots seed the sampler process's weight slots at the start of a
run and on resume (:meth:`BehaviorPolicy.versioned`; ``experiments.runtime.async_sampler``).
"""

from __future__ import annotations

import copy
from collections import deque

import torch

from experiments.runtime.adapters import load_policy_tensors, policy_tensors


class BehaviorPolicy:
    """``BehaviorPolicy(policy, staleness)``: ``sampler() -> (model, version)`` to sample with,
    ``push(policy)`` after every update, ``state_dict()`` / ``load_state_dict()`` for resume."""

    def __init__(self, policy: torch.nn.Module, staleness: int, dtype: torch.dtype = torch.float32,
                 local: bool = True) -> None:
        if staleness < 0:
            raise ValueError(f"staleness={staleness} must be >= 0 (0 = synchronous)")
        self.policy = policy
        self.staleness = staleness
        self.version = 0  # updates pushed so far = the learner's current version
        self._snapshots: deque = deque([policy_tensors(policy)] if staleness else [], maxlen=staleness + 1)
        own_copy = local and (bool(staleness) or dtype != torch.float32)  # local=False: another process samples
        self._model = copy.deepcopy(policy).to(dtype).eval() if own_copy else None

    def sampler(self) -> tuple[torch.nn.Module, int]:
        """The model to sample the next rollouts with and its policy version."""
        if self._model is None:
            return self.policy, self.version
        load_policy_tensors(self._model, self._snapshots[0] if self.staleness else policy_tensors(self.policy))
        return self._model, self.version - max(len(self._snapshots) - 1, 0)

    def versioned(self) -> list[tuple[int, dict]]:
        """``(version, tensors)`` of every snapshot held, oldest first (staleness > 0)."""
        first = self.version - (len(self._snapshots) - 1)
        return [(first + i, t) for i, t in enumerate(self._snapshots)]

    def push(self, policy: torch.nn.Module | None = None) -> None:
        """Record the weights after one more update (``policy`` defaults to the learner's)."""
        self.version += 1
        if self.staleness:
            self._snapshots.append(policy_tensors(policy if policy is not None else self.policy))

    def state_dict(self) -> dict:
        return {"version": self.version, "snapshots": list(self._snapshots)}

    def load_state_dict(self, state: dict) -> None:
        self.version = int(state["version"])
        self._snapshots = deque(state["snapshots"], maxlen=self.staleness + 1)


__all__ = ["BehaviorPolicy"]
