"""The policy backend: everything the rollout engine and the trainers need from a model.

A backend is a context layout (how env text becomes context ids and sampled ids become env text)
plus a model (cached sampling forwards for the engine, packed teacher-forced forwards for the
trainer). Two implementations: :class:`TinyBackend` (``algos.policy.PolicyModel`` over the word
vocabulary of ``envs.tokenizer``) and ``algos.hf_backend.HFPolicy`` (any Hugging Face causal LM
and its chat template, its own backend).

Layout of one segment (``algos.batch``): ``first(obs_0)  a_1  next(obs_1)  a_2  next(obs_2) ...``
where ``a_k`` are the sampled ids of action ``k`` (ending with a sampled end-of-action id, or,
when the action hit the length cap, followed by the env-written ``capped_close`` ids). Every id of
``first`` / ``next`` / ``capped_close`` is env-written (action_mask 0); only sampled ids carry loss
weight. For the word layout ``first(o) = [BOS] o [SEP]``, ``next(o) = o [SEP]``,
``capped_close = [EOS]``.

The trainer-facing model (``PolicyBackend.module``) is an ``nn.Module`` with

    forward(tokens [B, T], detach_value) -> (logits [B, T, V], values [B, T] | None)
    forward_at(tokens [B, T], want [B, T], detach_value) -> (logits [n, V] before each wanted token, values | None)
    value_head (a module or None), shape (algos.shape.PolicyShape: n_layers, d_model for the FLOP count)

and its parameter count for the FLOP counter is :func:`param_count`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch
from torch import nn

from algos.policy import PolicyModel, count_params
from envs.tokenizer import get_tokenizer


@runtime_checkable
class ContextLayout(Protocol):
    """Text <-> context ids of one backend (see the module docstring for the layout)."""

    end_ids: frozenset[int]  # ids that end an action when sampled (sampled, action_mask 1)
    capped_close: list[int]  # env-written ids that close an action which hit the length cap

    def first(self, obs: str, limit: int) -> tuple[list[int], list[int]]:
        """``(ids, kept)``: the context ids of a new segment whose first observation is ``obs``,
        at most ``limit`` ids (the observation is cut from the front, keeping its end), and the
        ids of the kept observation (``Segment.continuation`` of a compression)."""
        ...

    def next(self, obs: str, limit: int | None = None) -> list[int]:
        """The ids appended after an action for the next observation ``obs`` (at most ``limit``
        ids, the observation cut from the front; None: uncut)."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Display text of any ids (transcripts): special and template marker ids are not shown."""
        ...

    def action_ids(self, text: str) -> list[int]:
        """A demonstration's action ``text`` as ids ending with the end id (the warm start's
        behaviour-cloning targets; a sampled action is never re-encoded)."""
        ...

    def action_text(self, ids: list[int], capped: bool) -> str:
        """The text the env receives for an action's sampled ``ids`` (which end with a sampled
        end id unless ``capped``). Sampled ids are decoded, never re-encoded."""
        ...


class WordLayout:
    """``[BOS] obs [SEP] a [EOS] obs [SEP] ...`` over the word vocabulary (``envs.tokenizer``)."""

    def __init__(self) -> None:
        self.tok = get_tokenizer()
        self.end_ids = frozenset({self.tok.eos_id})
        self.capped_close = [self.tok.eos_id]

    @staticmethod
    def _fit(ids: list[int], keep: int) -> list[int]:
        keep = max(keep, 0)
        return ids if len(ids) <= keep else ids[len(ids) - keep:]

    def first(self, obs: str, limit: int) -> tuple[list[int], list[int]]:
        kept = self._fit(self.tok.encode(obs), limit - 2)
        return [self.tok.bos_id, *kept, self.tok.sep_id], kept

    def next(self, obs: str, limit: int | None = None) -> list[int]:
        ids = self.tok.encode(obs)
        if limit is not None:
            ids = self._fit(ids, limit - 1)
        return [*ids, self.tok.sep_id]

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    def action_ids(self, text: str) -> list[int]:
        return [*self.tok.encode(text), self.tok.eos_id]

    def action_text(self, ids: list[int], capped: bool) -> str:
        return self.tok.decode(ids if capped else ids[:-1])


WORD_LAYOUT = WordLayout()


@runtime_checkable
class PolicyBackend(Protocol):
    """What the rollout engine and the trainers use of a policy."""

    layout: ContextLayout
    module: nn.Module  # the trained module (``forward`` / ``forward_at`` / ``value_head`` / ``shape``)

    def new_cache(self, rows: int):
        """An empty sampling cache of ``rows`` rows; ``cache.reset_rows(rows)`` empties rows."""
        ...

    def step_last(self, cache, tokens: torch.Tensor, n_new: torch.Tensor) -> torch.Tensor:
        """Append ``tokens[b, :n_new[b]]`` to cache row ``b`` (prefill: several ids; decode: one)
        and return the logits ``[B, V]`` at each row's last appended id (rows with
        ``n_new = 0``: ignore them)."""
        ...

    def forward_at(self, tokens: torch.Tensor, want: torch.Tensor,
                   detach_value: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher-forced packed rows ``tokens [B, T]`` (right-padded): logits ``[n, V]`` at the
        positions before the ids marked by ``want`` (row-major) and values ``[B, T] | None``."""
        ...

    def n_params(self) -> int:
        """Parameters the FLOP counter charges per token (``algos.compute``)."""
        ...


class TinyBackend:
    """``PolicyModel`` + the word layout: the calls the engine made before backends existed."""

    def __init__(self, model: PolicyModel) -> None:
        self.module = model
        self.layout = WORD_LAYOUT

    def new_cache(self, rows: int):
        return self.module.new_cache(rows)

    def step_last(self, cache, tokens: torch.Tensor, n_new: torch.Tensor) -> torch.Tensor:
        return self.module.step_last(cache, tokens, n_new)

    def forward_at(self, tokens, want, detach_value: bool = False):
        return self.module.forward_at(tokens, want, detach_value=detach_value)

    def n_params(self) -> int:
        return count_params(self.module)


def as_backend(policy) -> PolicyBackend:
    """``policy`` itself when it is a backend; a ``PolicyModel`` wrapped in ``TinyBackend``.
    ``ValueError`` for anything else."""
    if isinstance(policy, PolicyModel):
        return TinyBackend(policy)
    if isinstance(policy, PolicyBackend):
        return policy
    raise ValueError(f"policy of type {type(policy).__name__} is neither a PolicyModel nor a PolicyBackend")


def param_count(module: nn.Module) -> int:
    """The FLOP counter's parameter count of a trainer-facing module: its own ``n_params()`` when
    it has one (a Hugging Face policy), else ``count_params`` (matmul parameters)."""
    own = getattr(module, "n_params", None)
    return int(own()) if callable(own) else count_params(module)


__all__ = ["ContextLayout", "PolicyBackend", "TinyBackend", "WORD_LAYOUT", "WordLayout", "as_backend", "param_count"]
