"""The checkpoint form of a policy: its full state dict, or only what trains on a frozen base.

A policy all of whose parameters train (the tiny ``PolicyModel``; an ``HFPolicy`` with
``policy.lora_r=0``) is checkpointed as its full ``state_dict()``. A *partly frozen* policy (some
parameter has ``requires_grad=False``: an ``HFPolicy`` with LoRA, where peft freezes every base
weight and the adapters and a value head train) is checkpointed as (:class:`PolicyCheckpoint`)::

    {"format": "trainable",
     "tensors": {key: tensor} for exactly the trainable parameters (state-dict keys),
     "frozen_keys": [every other state-dict key, in state-dict order],
     "base": {"path": the base model's path (policy.path), "sha256": frozen_sha256(policy)}}

*Frozen* is every state-dict entry that is not a trainable parameter (base weights and buffers).
Invariant: no frozen entry changes during a run (the trainer's optimizer holds only trainable
parameters), so rebuilding the model from the config (base model + start checkpoint) restores all
of it, and its hash is computed once per model.

The base hash (:func:`frozen_sha256`) is sha256 over the frozen entries in state-dict order, each
as its dtype, shape and raw bytes (names left out: peft renames a targeted ``q_proj.weight`` to
``q_proj.base_layer.weight``, so the hash names the base whatever the LoRA targets). It covers
exactly what the checkpoint leaves out, including what a start checkpoint loaded into the base,
for any weight-file format or sharding and for a hub id alike.

Resume (:meth:`PolicyCheckpoint.load_state_dict`) checks, each a one-line ``ValueError``: the base
path and hash equal the rebuilt model's, the saved tensors are exactly its trainable parameters
(same keys and shapes), the saved frozen keys exactly its frozen keys. A full state dict loads
strictly into either kind of policy.
"""

from __future__ import annotations

import hashlib

import torch
from torch import nn

TRAINABLE = "trainable"


def partly_frozen(model: nn.Module) -> bool:
    """True when some parameter of ``model`` does not train (``requires_grad=False``)."""
    return any(not p.requires_grad for p in model.parameters())


def trainable_keys(model: nn.Module) -> list[str]:
    """The state-dict keys of ``model``'s trainable parameters, in state-dict order."""
    return [k for k, v in model.state_dict(keep_vars=True).items() if isinstance(v, nn.Parameter) and v.requires_grad]


def frozen_keys(model: nn.Module) -> list[str]:
    """Every other state-dict key of ``model`` (frozen parameters and buffers), in state-dict order."""
    train = set(trainable_keys(model))
    return [k for k in model.state_dict(keep_vars=True) if k not in train]


def frozen_sha256(model: nn.Module) -> str:
    """sha256 over ``model``'s frozen state-dict entries in order: dtype, shape, raw bytes of each
    (one entry at a time on the CPU)."""
    h = hashlib.sha256()
    entries = model.state_dict()
    for k in frozen_keys(model):
        t = entries[k].detach()
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        h.update(t.reshape(-1).contiguous().cpu().view(torch.uint8).numpy())
    return h.hexdigest()


def policy_tensors(model: nn.Module) -> dict:
    """A detached copy of what a checkpoint holds of ``model``'s weights: the full state dict, or
    for a partly frozen model its trainable parameters only."""
    entries = model.state_dict()
    keys = trainable_keys(model) if partly_frozen(model) else list(entries)
    return {k: entries[k].detach().clone() for k in keys}


def _few(keys, n: int = 3) -> str:
    keys = list(keys)
    return f"{keys[:n]}" + (f" and {len(keys) - n} more" if len(keys) > n else "")


def check_trainable(model: nn.Module, tensors: dict) -> None:
    """One-line ``ValueError`` unless ``tensors`` are exactly ``model``'s trainable parameters
    (keys and shapes)."""
    want = trainable_keys(model)
    missing = [k for k in want if k not in tensors]
    unexpected = [k for k in tensors if k not in set(want)]
    if missing or unexpected:
        raise ValueError(f"checkpoint trainable tensors do not match the policy's {len(want)} trainable parameters: "
                         f"missing {_few(missing)}, unexpected {_few(unexpected)}")
    own = model.state_dict(keep_vars=True)
    bad = [f"{k} {tuple(tensors[k].shape)} (policy {tuple(own[k].shape)})" for k in want
           if tuple(tensors[k].shape) != tuple(own[k].shape)]
    if bad:
        raise ValueError(f"checkpoint trainable tensors have other shapes than the policy's: {_few(bad)}")


def load_trainable(model: nn.Module, tensors: dict) -> None:
    """Load ``tensors``, exactly ``model``'s trainable parameters (:func:`check_trainable`), into
    it; its frozen entries are left as they are."""
    check_trainable(model, tensors)
    model.load_state_dict(tensors, strict=False)


def load_policy_tensors(model: nn.Module, tensors: dict) -> None:
    """Load what :func:`policy_tensors` returned: a full state dict strictly, a partly frozen
    model's trainable parameters through :func:`load_trainable`."""
    if not partly_frozen(model) or set(tensors) == set(model.state_dict(keep_vars=True)):
        model.load_state_dict(tensors)
    else:
        load_trainable(model, tensors)


class PolicyCheckpoint:
    """``PolicyCheckpoint(policy, base_path)``: ``state_dict()`` / ``load_state_dict(state)`` of
    ``policy`` in its checkpoint form (module docstring); ``base_path`` names its base model
    (``policy.path``). The base hash is computed on first use and kept (frozen entries never
    change)."""

    def __init__(self, policy: nn.Module, base_path: str = "") -> None:
        self.policy, self.base_path = policy, str(base_path)
        self.full = not partly_frozen(policy)
        self._sha256: str | None = None

    @property
    def base_sha256(self) -> str:
        if self._sha256 is None:
            self._sha256 = frozen_sha256(self.policy)
        return self._sha256

    def state_dict(self) -> dict:
        if self.full:
            return self.policy.state_dict()
        return {"format": TRAINABLE, "tensors": policy_tensors(self.policy), "frozen_keys": frozen_keys(self.policy),
                "base": {"path": self.base_path, "sha256": self.base_sha256}}

    def load_state_dict(self, state: dict) -> None:
        if state.get("format") != TRAINABLE:
            self.policy.load_state_dict(state)  # a full state dict: every key, strictly
            return
        if self.full:
            raise ValueError("checkpoint holds only trainable tensors but the policy trains every parameter "
                             "(no frozen base to rebuild them on); allowed: a full state dict")
        self.check_base(state["base"])
        check_trainable(self.policy, state["tensors"])
        left_out, own = set(state["frozen_keys"]), set(frozen_keys(self.policy))
        if left_out != own:
            extra, lacking = sorted(left_out - own), sorted(own - left_out)
            raise ValueError(f"checkpoint left out other keys than the policy's {len(own)} frozen ones: only in the "
                             f"checkpoint {_few(extra)}, only in the policy {_few(lacking)}")
        self.policy.load_state_dict(state["tensors"], strict=False)

    def check_base(self, base: dict) -> None:
        """One-line ``ValueError`` unless ``base`` (a checkpoint's) names this policy's base model."""
        if (base["path"], base["sha256"]) != (self.base_path, self.base_sha256):
            raise ValueError(f"checkpoint base model (path {base['path']!r}, sha256 {base['sha256']}) differs from the "
                             f"rebuilt policy's (path {self.base_path!r}, sha256 {self.base_sha256}); allowed: resume "
                             "with the policy.path and start model the run was started with")


__all__ = ["PolicyCheckpoint", "TRAINABLE", "check_trainable", "frozen_keys", "frozen_sha256", "load_policy_tensors",
           "load_trainable", "partly_frozen", "policy_tensors", "trainable_keys"]
