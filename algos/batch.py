"""The data model of a rollout (docs/algorithms.md) and its collation into padded tensors.

Trajectory -> Segments -> tokens. A **trajectory** is one attempt at one task instance; a
**segment** is one context window the policy actually saw, from a reset or a compression to the
next compression or the episode end. One segment is one training row; the rows of a trajectory
stay tied to it through ``row_traj`` (GRPO group members are trajectories, never segments: C13).

Per token (aligned to the token index ``t``):
  ``tokens[t]``          id
  ``action_mask[t]``     1 only for tokens the policy sampled (action words and the EOS that ends
                         the action); BOS, observations, SEP and a forced EOS after an action that
                         hit the length cap are env-written: 0
  ``behavior_logp[t]``   log-prob of the sampled token under the sampler (its temperature, its
                         weights); 0 for env-written tokens
  ``policy_version[t]``  version of the weights that sampled it; -1 for env-written tokens
Per turn (one action = one tool call): first/last sampled token index, reward (placed on the last
sampled token), tool status, whether the action hit the length cap, and the anchor ``state_key``
of the state the action was chosen in (``info["state_key"]`` of the reset or of the previous step;
-1 when the env gives none): GiGPO's step groups.
Per segment: ``start`` (reset|compression), ``end`` (terminated|truncated|compressed|masked); for a
compressed end the continuation context (token ids of the compressed observation the episode
continued from: the next segment starts ``[BOS] continuation [SEP]``); for a truncated end the
index of the final ``[SEP]`` after the last observation (the value read there is V(next state)).
Four roles, four fields: behavior log-probs live here; old log-probs, reference log-probs and
values are computed by the trainer at update time; the verifier's score is ``Trajectory.verified``.

``ContextBuilder`` is the one code path that lays out contexts; the rollout engine and the
behavior-cloning warm start both use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from algos.advantages import VALUE_LEVELS
from algos.checks import pick
from envs.tokenizer import get_tokenizer


@dataclass
class Turn:
    start: int  # index of the first sampled token of the action
    end: int  # index of the last sampled token (EOS, or the last word when the cap was hit)
    reward: float = 0.0
    tool_status: str = "ok"
    capped: bool = False
    # info["state_key"] (64-bit state hash) of the state the action was chosen in; -1: none given
    state_key: int = -1


@dataclass
class Segment:
    tokens: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    behavior_logp: list[float] = field(default_factory=list)
    policy_version: list[int] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    start: str = "reset"  # reset | compression (the segment continues a compressed context)
    end: str = "open"  # terminated | truncated | compressed | masked | open (not ended yet)
    continuation: list[int] | None = None  # compressed observation the next segment starts from
    bootstrap_index: int | None = None  # truncated end: index of the final SEP (V(next state))
    compression: dict | None = None  # info["compression"] of the step that ended this segment

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def n_sampled(self) -> int:
        return sum(self.action_mask)


@dataclass
class Trajectory:
    task_id: str = ""
    group_id: int = 0
    index: int = 0  # position in the rollout request
    seed: int = 0
    options: dict | None = None
    segments: list[Segment] = field(default_factory=list)
    stop_reason: str = ""
    terminated: bool = False
    truncated: bool = False
    masked: bool = False
    verified: int | None = None  # independent verifier's 0/1 (None when masked)
    train_reward: float = 0.0  # sum of the env's training rewards
    visible_pass_rate: float | None = None
    hack_flags: dict = field(default_factory=dict)
    turns: int = 0
    generated_tokens: int = 0
    observation_tokens: int = 0  # env-written tokens the policy read in the rollout (recording.read_env_tokens)
    tool_seconds: float = 0.0
    tool_failures: int = 0  # turns hit by an injected tool fault (timeout, flaky, crash)
    policy_version: int = 0  # version of the sampler when the trajectory started
    # sampling temperature the behavior log-probs were taken at (None: scripted demo, not sampled)
    temperature: float | None = None
    final_info: dict = field(default_factory=dict)

    @property
    def state_keys(self) -> list[int]:
        """Per turn of the whole trajectory (all segments, in order): ``Turn.state_key``."""
        return [turn.state_key for seg in self.segments for turn in seg.turns]


class ContextBuilder:
    """Lays out ``[BOS] obs_0 [SEP] a_1 [EOS] obs_1 [SEP] ...`` into a list of ``Segment``s."""

    def __init__(self, max_len: int) -> None:
        tok = get_tokenizer()
        self.bos, self.eos, self.sep = tok.bos_id, tok.eos_id, tok.sep_id
        self.max_len = max_len
        self.segments: list[Segment] = []
        self._turn_start: int | None = None

    @property
    def seg(self) -> Segment:
        return self.segments[-1]

    def _env(self, ids) -> None:
        s = self.seg
        s.tokens.extend(ids)
        s.action_mask.extend([0] * len(ids))
        s.behavior_logp.extend([0.0] * len(ids))
        s.policy_version.extend([-1] * len(ids))

    def start_segment(self, obs_ids: list[int], kind: str, room: int = 0) -> list[int]:
        """Open a segment ``[BOS] obs [SEP]``; returns the ids appended (to feed the model).
        The observation is cut (keeping its end, which holds the latest tool output) so that
        ``room`` more tokens still fit in ``max_len``."""
        obs_ids = self.fit(obs_ids, 2 + room, 0)
        self.segments.append(Segment(start=kind))
        ids = [self.bos, *obs_ids, self.sep]
        self._env(ids)
        return ids

    def open_segment(self, ids: list[int], kind: str) -> list[int]:
        """Open a segment whose context is the env-written ``ids`` (a backend layout's ``first``);
        returns them (to feed the model)."""
        self.segments.append(Segment(start=kind))
        self._env(ids)
        return list(ids)

    def add_env(self, ids: list[int]) -> list[int]:
        """Append env-written ``ids`` (a backend layout's ``next``); returns them."""
        self._env(ids)
        return list(ids)

    def fit(self, obs_ids: list[int], extra: int, used: int) -> list[int]:
        keep = max(self.max_len - used - extra, 0)
        return obs_ids if len(obs_ids) <= keep else obs_ids[len(obs_ids) - keep:]

    def add_sampled(self, token: int, logp: float, version: int) -> None:
        s = self.seg
        if self._turn_start is None:
            self._turn_start = len(s.tokens)
        s.tokens.append(int(token))
        s.action_mask.append(1)
        s.behavior_logp.append(float(logp))
        s.policy_version.append(int(version))

    def end_action(self, capped: bool, close: list[int] | None = None) -> Turn:
        """Close the current action; a capped action gets the env-written ``close`` ids
        (action_mask 0; default ``[EOS]``)."""
        s = self.seg
        start = self._turn_start if self._turn_start is not None else len(s.tokens)
        turn = Turn(start=start, end=len(s.tokens) - 1, capped=capped)
        s.turns.append(turn)
        self._turn_start = None
        if capped:
            self._env([self.eos] if close is None else close)
        return turn

    def add_observation(self, obs_ids: list[int], room: int = 0) -> list[int]:
        """Append ``obs [SEP]`` (env-written); cut from the front to leave ``room`` tokens."""
        obs_ids = self.fit(obs_ids, 1 + room, len(self.seg.tokens))
        ids = [*obs_ids, self.sep]
        self._env(ids)
        return ids

    def room(self) -> int:
        return self.max_len - len(self.seg.tokens)


# ---------------------------------------------------------------------------------------------
# Collation
# ---------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """Padded tensors of all segments (rows) of a list of trajectories. ``R`` rows, ``T`` columns."""

    tokens: torch.Tensor  # [R, T] long, PAD=0 on the right
    valid: torch.Tensor  # [R, T] bool, real (non-pad) tokens
    action_mask: torch.Tensor  # [R, T] float
    behavior_logp: torch.Tensor  # [R, T] float
    policy_version: torch.Tensor  # [R, T] long, -1 env-written / pad
    rewards: torch.Tensor  # [R, T] float, each turn's reward on its last sampled token
    turn_index: torch.Tensor  # [R, T] long, turn number within the trajectory for action tokens, -1 else
    turn_first: torch.Tensor  # [R, T] bool, first sampled token of each turn
    row_traj: torch.Tensor  # [R] long, index of the row's trajectory in ``trajectories``
    row_segment: torch.Tensor  # [R] long, segment number within its trajectory
    bootstrap_index: torch.Tensor  # [R] long, final SEP of a truncated segment, else -1
    trajectories: list[Trajectory]

    @property
    def num_rows(self) -> int:
        return self.tokens.shape[0]

    def segment(self, row: int) -> Segment:
        return self.trajectories[int(self.row_traj[row])].segments[int(self.row_segment[row])]


def collate(trajectories: list[Trajectory], pad_id: int = 0) -> Batch:
    """One row per segment, right-padded to the longest segment."""
    rows = [(i, j, s) for i, tr in enumerate(trajectories) for j, s in enumerate(tr.segments)]
    r = len(rows)
    t_max = max((len(s) for _, _, s in rows), default=1)
    tokens = torch.full((r, t_max), pad_id, dtype=torch.long)
    valid = torch.zeros(r, t_max, dtype=torch.bool)
    action_mask = torch.zeros(r, t_max)
    behavior_logp = torch.zeros(r, t_max)
    version = torch.full((r, t_max), -1, dtype=torch.long)
    rewards = torch.zeros(r, t_max)
    turn_index = torch.full((r, t_max), -1, dtype=torch.long)
    turn_first = torch.zeros(r, t_max, dtype=torch.bool)
    row_traj = torch.zeros(r, dtype=torch.long)
    row_seg = torch.zeros(r, dtype=torch.long)
    boot = torch.full((r,), -1, dtype=torch.long)
    turn_offset: dict[int, int] = {}
    for k, (i, j, s) in enumerate(rows):
        n = len(s)
        tokens[k, :n] = torch.tensor(s.tokens, dtype=torch.long)
        valid[k, :n] = True
        action_mask[k, :n] = torch.tensor(s.action_mask, dtype=torch.float32)
        behavior_logp[k, :n] = torch.tensor(s.behavior_logp, dtype=torch.float32)
        version[k, :n] = torch.tensor(s.policy_version, dtype=torch.long)
        base = turn_offset.get(i, 0)
        for u, turn in enumerate(s.turns):
            rewards[k, turn.end] = turn.reward
            turn_index[k, turn.start: turn.end + 1] = base + u
            turn_first[k, turn.start] = True
        turn_offset[i] = base + len(s.turns)
        row_traj[k], row_seg[k] = i, j
        if s.end == "truncated" and s.bootstrap_index is not None:
            boot[k] = s.bootstrap_index
    # env-written forced EOS tokens inside a turn span are not actions
    turn_index[action_mask == 0] = -1
    return Batch(tokens, valid, action_mask, behavior_logp, version, rewards, turn_index, turn_first,
                 row_traj, row_seg, boot, list(trajectories))


# A forward's fixed cost in token positions (Python dispatch of a tiny model's ops, autograd
# bookkeeping): ``length_buckets`` opens a new slice only when it saves more padded positions.
SLICE_OVERHEAD_POSITIONS = 128


#: the shortest common prefix (ids) worth computing once for several rows (the HF policy's
#: sampling and training forward, the trainer's token budget)
MIN_SHARED_PREFIX = 16


def common_prefix_length(tokens: torch.Tensor, n: torch.Tensor) -> int:
    """The longest ``p`` with ``tokens[:, :p]`` equal in every row, below every row's ``n`` (each
    row keeps at least one id of its own: its logits come from its last id)."""
    limit = min(int(n.min()) - 1, tokens.shape[1])
    if limit <= 0:
        return 0
    same = (tokens[:, :limit] == tokens[:1, :limit]).all(0)
    return limit if bool(same.all()) else int(torch.nonzero(~same)[0])


def budget_buckets(tokens: torch.Tensor | None, lengths: torch.Tensor, max_rows: int, max_tokens: int | None = None,
                   share_prefix: bool = False) -> list[torch.Tensor]:
    """:func:`length_buckets` of right-padded rows ``tokens [n, T]`` (real ``lengths [n]``) under
    the token budget ``max_tokens``; for a ``share_prefix`` model (its forward computes the ids all
    rows begin with once) the rows' :func:`common_prefix_length` ``p`` (at least
    :data:`MIN_SHARED_PREFIX`) counts once: a slice costs ``p + rows * (longest - p)`` positions
    (``tokens=None``: no prefix is known, every row counts whole). The budget of behaviour
    cloning's and the update's micro-batches."""
    shared = 0
    if max_tokens is not None and share_prefix and tokens is not None:
        shared = common_prefix_length(tokens, lengths)
        shared = shared if shared >= MIN_SHARED_PREFIX else 0
    return length_buckets(lengths - shared, max_rows, max_tokens=None if max_tokens is None else max(1, max_tokens - shared))


def shared_prefix_length(tokens: torch.Tensor) -> int:
    """The ids a prefix-sharing forward of right-padded rows ``tokens [B, T]`` computes once: their
    :func:`common_prefix_length` at full width when there are several rows and it reaches
    :data:`MIN_SHARED_PREFIX`, else 0 (every row computes its own)."""
    if tokens.shape[0] < 2:
        return 0
    p = common_prefix_length(tokens, torch.full((tokens.shape[0],), tokens.shape[1]))
    return p if p >= MIN_SHARED_PREFIX else 0


def row_lengths(batch: "Batch") -> torch.Tensor:
    """``[R]`` long: real (non-pad) tokens of each row (rows are right-padded)."""
    return batch.valid.sum(1)


def length_buckets(lengths: torch.Tensor, max_rows: int,
                   overhead: int = SLICE_OVERHEAD_POSITIONS, max_tokens: int | None = None) -> list[torch.Tensor]:
    """Partition rows ``0..n-1`` (``lengths [n]``) into slices of near-equal length.

    Each slice is forwarded as ``[len(slice), max(lengths[slice])]`` (right-padded, trimmed to its
    own longest row), so it costs ``overhead + len(slice) * max(lengths[slice])`` positions. Rows
    are sorted by ``(length, index)`` and cut into consecutive runs of at most ``max_rows`` rows by
    an exact dynamic program that minimises the total cost

        C(j) = min_{j - max_rows <= i < j}  C(i) + overhead + (j - i) * l_(j)     (l sorted ascending)

    ``max_tokens`` (a token budget, like verl's ``ppo_max_token_len_per_gpu``) also bounds a
    slice's padded positions, ``(j - i) * l_(j) <= max_tokens``; a row longer than the budget is a
    slice of its own (one row cannot be split). Returns the slices as index tensors (ascending
    length inside a slice, shortest slice first). Deterministic: depends only on ``lengths``,
    ``max_rows``, ``overhead`` and ``max_tokens``. Raises ``ValueError`` for ``max_rows < 1`` or
    ``max_tokens < 1``."""
    if max_rows < 1:
        raise ValueError(f"max_rows={max_rows} must be >= 1")
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens={max_tokens} invalid; allowed: an int >= 1 or None (no token budget)")
    n = int(lengths.numel())
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: (int(lengths[i]), i))
    ls = [int(lengths[i]) for i in order]
    best = [0] + [None] * n  # best[j]: min cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        lj = ls[j - 1]
        for i in range(max(0, j - max_rows), j):
            if max_tokens is not None and j - i > 1 and (j - i) * lj > max_tokens:
                continue
            cost = best[i] + overhead + (j - i) * lj
            if best[j] is None or cost < best[j]:
                best[j], cut[j] = cost, i
    slices = []
    j = n
    while j > 0:
        slices.append(torch.tensor(order[cut[j]:j], dtype=torch.long))
        j = cut[j]
    return slices[::-1]


def action_layout(batch: Batch, level: str = "token") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each trajectory's decision points, all segments in order, as one row (for GAE).

    ``level`` names the decision points (``algos.advantages.VALUE_LEVELS``): ``"token"`` every
    sampled token, ``"turn"`` the first sampled token of each turn. Returns ``(rows [N, L], cols [N, L], mask [N, L])`` where
    ``(rows[i, k], cols[i, k])`` is the batch position of trajectory ``i``'s ``k``-th decision point
    (padding where ``mask`` is False; padded entries point at (0, 0))."""
    points = pick(VALUE_LEVELS, "algo.value_level", level)(batch.action_mask, batch.turn_first)
    per_traj: list[list[tuple[int, int]]] = [[] for _ in batch.trajectories]
    # rows of a trajectory are consecutive and in segment order (collate builds them that way)
    for row in range(batch.num_rows):
        cols = torch.nonzero(points[row], as_tuple=False).flatten().tolist()
        per_traj[int(batch.row_traj[row])].extend((row, c) for c in cols)
    n = len(per_traj)
    length = max((len(p) for p in per_traj), default=1) or 1
    rows = torch.zeros(n, length, dtype=torch.long)
    cols = torch.zeros(n, length, dtype=torch.long)
    mask = torch.zeros(n, length, dtype=torch.bool)
    for i, pts in enumerate(per_traj):
        if pts:
            rows[i, : len(pts)] = torch.tensor([p[0] for p in pts])
            cols[i, : len(pts)] = torch.tensor([p[1] for p in pts])
            mask[i, : len(pts)] = True
    return rows, cols, mask


__all__ = [
    "Batch",
    "ContextBuilder",
    "Segment",
    "Trajectory",
    "Turn",
    "action_layout",
    "collate",
    "budget_buckets",
    "length_buckets",
    "MIN_SHARED_PREFIX",
    "common_prefix_length",
    "row_lengths",
    "shared_prefix_length",
]
