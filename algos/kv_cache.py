"""The incremental-decoding state of ``algos.policy.PolicyModel``: the KV cache and the index plan
of one packed cached forward.

``KVCache``: per-layer key/value buffers for a batch of rows, each row with its own length,
growing on demand. ``PackedPlan``: for one ``PolicyModel.step`` (``n_b`` new tokens for row
``b``), the indices of the real new tokens, their cache writes and the attention masks of the
rows that add one token and of those that add several (``Block.forward_packed`` reads it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from algos.shape import PolicyShape

# positions a new KVCache starts with (it grows on demand): a BugFix episode's context is ~100-300 tokens
KV_INITIAL_CAPACITY = 256


class KVCache:
    """Per-layer key/value buffers ``[B, H, capacity, Dh]`` plus each row's current length.

    The buffers start at ``min(initial, max_len + 1)`` positions (``KV_INITIAL_CAPACITY`` by
    default) and grow on demand (``reserve``: to at least the positions asked for, at least
    doubling, at most ``max_len + 1``); unwritten positions are zeros (finite keys and values under
    a masked score). Rollout contexts are mostly far shorter than ``max_len``, so a full-size cache
    would hold (and zero) mostly unused memory: 269 MB for 64 rows of the small policy.
    At most ``max_len + 1`` positions: the extra slot absorbs the writes of the padded path's
    right-padding queries (that path reserves the full size first; their outputs are ignored), so
    they can never overwrite a real token's entry.
    """

    def __init__(self, shape: PolicyShape, batch_size: int, dtype=torch.float32, initial: int | None = None) -> None:
        dh = shape.d_model // shape.n_heads
        self.max_len = shape.max_len
        self.capacity = min(shape.max_len + 1, KV_INITIAL_CAPACITY if initial is None else max(1, initial))
        self.k = [torch.zeros(batch_size, shape.n_heads, self.capacity, dh, dtype=dtype) for _ in range(shape.n_layers)]
        self.v = [torch.zeros(batch_size, shape.n_heads, self.capacity, dh, dtype=dtype) for _ in range(shape.n_layers)]
        self.lengths = torch.zeros(batch_size, dtype=torch.long)

    def reserve(self, positions: int) -> None:
        """Make positions ``0 .. positions - 1`` addressable (``positions <= max_len + 1``): grow
        every buffer to ``min(max_len + 1, max(positions, 2 * capacity))``, keeping the written
        entries and zero-filling the new positions. No-op when they already fit."""
        if positions <= self.capacity:
            return
        if positions > self.max_len + 1:
            raise ValueError(f"KV cache of {positions} positions exceeds policy.max_len + 1 = {self.max_len + 1}")
        grow = min(self.max_len + 1, max(positions, 2 * self.capacity)) - self.capacity
        self.k = [F.pad(k, (0, 0, 0, grow)) for k in self.k]
        self.v = [F.pad(v, (0, 0, 0, grow)) for v in self.v]
        self.capacity += grow

    def reset_rows(self, rows) -> None:
        """Empty the given rows (a new episode or a new segment after compression)."""
        self.lengths[torch.as_tensor(rows, dtype=torch.long)] = 0


@dataclass
class PackedPlan:
    """Index tensors of one packed cached forward, shared by all layers.

    The ``N`` real new tokens (row ``tok_b``, offset ``tok_j`` in ``tokens``) in row-major order;
    ``pos [N]`` their absolute positions; ``cache_row``, ``head_idx``, ``pos_h`` (all ``[N, H]``)
    index the cache writes (cache row, head, position of every token's every head). ``single``: ``(token idx, cache rows, mask
    [B, 1, 1, Tk], Tk)`` for rows adding exactly one token; ``multi``: ``(token idx, cache rows,
    slot, col, mask [m, 1, w, Tk], Tk, w)`` for rows adding several (``slot``/``col``: each
    token's place in the padded ``[m, w]`` query block)."""

    n_tokens: int
    tok_b: torch.Tensor
    tok_j: torch.Tensor
    pos: torch.Tensor
    cache_row: torch.Tensor
    head_idx: torch.Tensor
    pos_h: torch.Tensor
    single: tuple | None
    multi: tuple | None
    last: tuple  # (token idx, cache rows, mask [B, 1, 1, Tk], Tk): each row's last new token
    last_b: torch.Tensor  # [b'] index (in ``tokens``) of the rows that add at least one token

    @staticmethod
    def build(row_ids: torch.Tensor, start: torch.Tensor, n_new: torch.Tensor, cache: KVCache) -> "PackedPlan":
        n_max = int(n_new.max()) if n_new.numel() else 0
        offs = torch.arange(max(n_max, 1))
        real = offs[None, :] < n_new[:, None]
        tok_b, tok_j = torch.nonzero(real, as_tuple=True)
        pos = start[tok_b] + tok_j
        cache_row = row_ids[tok_b]
        h = cache.k[0].shape[1]
        heads = torch.arange(h)[None, :]
        single = multi = None
        cache_b = cache.k[0].shape[0]

        def one_query(idx: torch.Tensor) -> tuple:
            """Attention inputs for one query per cache row (rows not in ``idx`` see key 0 only)."""
            rows = cache_row[idx]
            t_keys = int(pos[idx].max()) + 1
            limit = torch.zeros(cache_b, dtype=torch.long)
            limit[rows] = pos[idx]
            mask = torch.zeros(cache_b, 1, 1, t_keys).masked_fill_(
                (torch.arange(t_keys)[None, :] > limit[:, None])[:, None, None, :], float("-inf"))
            return idx, rows, mask, t_keys

        last_b = torch.nonzero(n_new > 0, as_tuple=True)[0]
        last_idx = torch.cumsum(n_new, 0)[last_b] - 1
        last = one_query(last_idx) if len(last_idx) else None
        is_single = n_new[tok_b] == 1
        if bool(is_single.any()):
            # every cache row gets a query; rows not in the group see key 0 only (output ignored)
            single = one_query(torch.nonzero(is_single, as_tuple=True)[0])
        if not bool(is_single.all()):
            idx = torch.nonzero(~is_single, as_tuple=True)[0]
            rows, slot = torch.unique(cache_row[idx], return_inverse=True)
            col = tok_j[idx]
            width = int(col.max()) + 1
            t_keys = int(pos[idx].max()) + 1
            qpos = torch.full((len(rows), width), -1, dtype=torch.long)
            qpos[slot, col] = pos[idx]
            # padded queries (qpos -1) see key 0 so their softmax stays finite; ignored
            mask = torch.zeros(len(rows), 1, width, t_keys).masked_fill_(
                (torch.arange(t_keys)[None, None, :] > qpos.clamp(min=0)[:, :, None])[:, None], float("-inf"))
            multi = (idx, rows, slot, col, mask, t_keys, width)
        return PackedPlan(n_tokens=int(tok_b.numel()), tok_b=tok_b, tok_j=tok_j, pos=pos,
                           cache_row=cache_row[:, None].expand(-1, h), head_idx=heads.expand(len(pos), h),
                           pos_h=pos[:, None].expand(-1, h), single=single, multi=multi, last=last, last_b=last_b)


__all__ = ["KV_INITIAL_CAPACITY", "KVCache", "PackedPlan"]
