"""Context compression: a wrapper that replaces the agent-visible history with a shorter context.

Compression is not an episode end: the wrapper never sets ``terminated`` or ``truncated``; the
compressed context is the first observation of the next segment and the episode continues from it
(trainers bootstrap across it, claims C13/C16/C17). Strategies are chosen by name from
``STRATEGIES``; each reads only the wrapper's own turn log and the env's contract methods
``task_statement()`` / ``memory_facts()`` (an ``envs.memory.MemoryFacts``; docs/interfaces.md), so
they work on every env. The wrapper's knobs and their defaults are declared once,
:class:`CompressionSettings` (the config layer's ``compression`` group is that dataclass).
"""

from __future__ import annotations

import copy
import string
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from envs import vocab
from envs.memory import MemoryFacts
from envs.tokenizer import get_tokenizer

# The structured summary's fields, in render order (names of ``MemoryFacts`` fields).
SUMMARY_FIELDS = ("task", "tried", "code_state", "pending")
MASK_PLACEHOLDER = "[ output hidden ]"
MALFORMED_PLACEHOLDER = "( malformed action )"
COMPACT_ACTION = "compact"
TRIGGERS = ("tokens", "turns", "action")


CLIPPED_HEAD = "[ clipped ]"


def clip_to_length(text: str, max_chars: int) -> str:
    """``text`` if it has at most ``max_chars`` characters, else its tail (cut at a word or line
    boundary) after a ``[ clipped ]`` line, within ``max_chars``: the wrapper's observations
    always fit its observation space, and the latest output (at the end) is what is kept."""
    if len(text) <= max_chars:
        return text
    room = max_chars - len(CLIPPED_HEAD) - 1
    tail = text[len(text) - room:]
    cut = min((i for i in (tail.find(" "), tail.find("\n")) if i >= 0), default=-1)
    tail = tail[cut + 1:] if cut >= 0 else ""
    return f"{CLIPPED_HEAD}\n{tail}"


@dataclass(frozen=True)
class CompressionRequest:
    """Everything a strategy may read.

    ``turns``: every env turn since reset as ``(action, observation)``, across segments (a
    ``compact`` action is not an env turn and is not logged). ``latest``: the newest tool output
    (the reset observation when no turn was taken yet). ``facts``: the env's ``memory_facts()``.
    ``rng``: the wrapper's seeded generator.
    """

    task: str
    facts: MemoryFacts
    turns: tuple
    latest: str
    keep_last: int
    drop_prob: float
    rng: np.random.Generator


def _num(n: int) -> str:
    return str(n) if vocab.INTEGER_RANGE[0] <= n <= vocab.INTEGER_RANGE[1] else "many"


def _render_action(action) -> str:
    """An action as one context line; text the policy cannot have produced (words outside the
    vocabulary, e.g. random check_env strings) is shown as a placeholder so the context encodes."""
    text = " ".join(action.split()) if isinstance(action, str) else ""
    if not text or not get_tokenizer().can_encode(text):
        return MALFORMED_PLACEHOLDER
    return text


def _turn_lines(turns, hide_before: int) -> list[str]:
    lines: list[str] = []
    for i, (action, obs) in enumerate(turns):
        lines.append(f"action : {_render_action(action)}")
        lines.append(MASK_PLACEHOLDER if i < hide_before else obs)
    return lines


def _recent(req: CompressionRequest) -> tuple[str, list[str]]:
    """Task statement + the last ``keep_last`` turns (action and full output), verbatim."""
    kept = req.turns[-req.keep_last :] if req.turns else ()
    lines = ["context compressed : recent turns", req.task]
    omitted = len(req.turns) - len(kept)
    if omitted:
        lines.append(f"( {_num(omitted)} earlier turns omitted )")
    lines += _turn_lines(kept, hide_before=0)
    if not kept and req.latest != req.task:
        lines += ["latest output :", req.latest]
    return "\n".join(lines), []


def _mask_observations(req: CompressionRequest) -> tuple[str, list[str]]:
    """Task statement + every turn's action; outputs older than the last ``keep_last`` turns are
    replaced by ``[ output hidden ]`` (observation masking)."""
    lines = ["context compressed : old outputs hidden", req.task]
    lines += _turn_lines(req.turns, hide_before=len(req.turns) - req.keep_last)
    if not req.turns and req.latest != req.task:
        lines += ["latest output :", req.latest]
    return "\n".join(lines), []


def _lossy_summary(req: CompressionRequest) -> tuple[str, list[str]]:
    """Task statement + only the latest test status + the latest output. Tried approaches, code
    state and pending work are lost: claim C10's failure mode (docs/claims.md)."""
    lines = [
        "context compressed : summary",
        req.task,
        f"status : {req.facts.last_test_status}",
        "latest output :",
        req.latest,
    ]
    return "\n".join(lines), ["tried", "code_state", "pending"]


def _structured_summary(req: CompressionRequest) -> tuple[str, list[str]]:
    """Task, tried approaches with their errors, code state, pending work, then the latest output.
    With ``drop_prob > 0`` each field is dropped independently (``rng.random() < drop_prob``,
    one draw per field in ``SUMMARY_FIELDS`` order); dropped fields are listed in ``dropped``."""
    if req.drop_prob > 0:
        dropped = [f for f in SUMMARY_FIELDS if req.rng.random() < req.drop_prob]
    else:
        dropped = []
    facts = req.facts
    lines = ["context compressed : summary"]
    if "task" not in dropped:
        lines.append(facts.task)
    if "tried" not in dropped:
        tried = list(facts.tried)
        lines += (["tried :"] + tried) if tried else ["tried : none"]
    if "code_state" not in dropped:
        lines.append(f"code state : {facts.code_state}")
    if "pending" not in dropped:
        lines.append(f"pending : {facts.pending}")
    lines += ["latest output :", req.latest]
    return "\n".join(lines), dropped


# name -> strategy(request) -> (new context text, dropped summary fields). ``none`` never compresses.
STRATEGIES: dict[str, Callable[[CompressionRequest], tuple[str, list[str]]] | None] = {
    "none": None,
    "recent": _recent,
    "mask_observations": _mask_observations,
    "lossy_summary": _lossy_summary,
    "structured_summary": _structured_summary,
}


def get_strategy(name: str):
    """The strategy called ``name``; ``ValueError`` lists the valid names."""
    if name not in STRATEGIES:
        raise ValueError(f"unknown compression strategy {name!r}; valid: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]


def _check_knobs(trigger, budget_tokens, budget_fraction, every_turns, keep_last, max_compactions, drop_prob) -> None:
    """``ValueError`` naming the first bad knob of :class:`ContextCompression` and what is allowed."""
    if trigger not in TRIGGERS:
        raise ValueError(f"unknown compression trigger {trigger!r}; valid: {', '.join(TRIGGERS)}")
    if trigger == "turns" and (
        isinstance(every_turns, bool) or not isinstance(every_turns, int) or every_turns < 1
    ):
        raise ValueError(f"trigger='turns' needs every_turns as an int >= 1, got {every_turns!r}")
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise ValueError(f"budget_tokens must be an int >= 1, got {budget_tokens!r}")
    if not 0.0 < float(budget_fraction) <= 1.0:
        raise ValueError(f"budget_fraction must be in (0, 1], got {budget_fraction!r}")
    if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
        raise ValueError(
            f"keep_last must be an int >= 1 (the latest tool output is always kept), got {keep_last!r}"
        )
    if isinstance(max_compactions, bool) or not isinstance(max_compactions, int) or max_compactions < 0:
        raise ValueError(f"max_compactions must be an int >= 0, got {max_compactions!r}")
    if not 0.0 <= float(drop_prob) <= 1.0:
        raise ValueError(f"drop_prob must be in [0, 1], got {drop_prob!r}")


@dataclass
class CompressionSettings:
    """The knobs of :class:`ContextCompression`, with their defaults: its one declaration (the
    Hydra ``compression`` group, ``experiments.runtime.schema.CompressionConfig``, extends it; the
    wrapper reads it; ``envs.make(..., compression=...)`` takes it). The wrapper checks the values
    when built (``ValueError`` naming the first bad knob)."""

    # a name in STRATEGIES; "none" = no wrapper
    strategy: str = "none"
    # tokens | turns | action (the agent may also send 'compact')
    trigger: str = "tokens"
    # the token trigger fires above budget_fraction * budget_tokens context tokens
    budget_tokens: int = 256
    budget_fraction: float = 0.8
    # segment length for trigger=turns (required there)
    every_turns: Optional[int] = None
    # raw turns kept by recent / mask_observations (>= 1)
    keep_last: int = 2
    # compressions per episode at most (>= 0)
    max_compactions: int = 8
    # per-field drop probability of structured_summary (0..1)
    drop_prob: float = 0.0


def _widened_space(inner: gym.Space) -> spaces.Text:
    """Compressed contexts may be longer than any single tool output and contain the wrapper's
    header words: the inner text space widened to every printable character and 2^20 characters."""
    charset = set(string.ascii_letters + string.digits + string.punctuation + " \n")
    max_length = 1 << 20
    if isinstance(inner, spaces.Text):
        charset |= set(inner.character_set)
        max_length = max(max_length, inner.max_length)
    return spaces.Text(max_length, min_length=0, charset=frozenset(charset))


class ContextCompression(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Replaces the agent-visible history with a compressed context when a trigger fires.

    The wrapper keeps its own copy of the agent-visible context of the current segment and counts
    its tokens exactly like docs/interfaces.md: ``count(obs_0) + 2`` for ``[BOS] obs_0 [SEP]``,
    then ``count(action) + 1 + count(obs) + 1`` per turn (``count`` = ``Tokenizer.count``).

    **Triggers** (checked after every env step that did not end the episode):
    ``trigger="tokens"``: context tokens ``> budget_fraction * budget_tokens``;
    ``trigger="turns"``: the current segment has ``every_turns`` turns;
    ``trigger="action"``: only on request. With any trigger the agent may also send the action
    ``compact`` (exactly that one word) to request a compression now.

    **Compression step.** The strategy builds a new context (it always contains the latest tool
    output). If it is not strictly shorter than the context it would replace, nothing happens (the
    step is an ordinary one; it does not count toward the cap). Otherwise ``step`` returns it as
    the observation and adds
    ``info["compression"] = {"segment_id", "tokens_before", "tokens_after", "dropped"}``:
    ``segment_id`` is the id of the segment this observation starts (reset starts segment 0),
    ``tokens_before`` the tokens of the context being replaced, ``tokens_after`` =
    ``count(new_obs) + 2`` (the policy's new ``[BOS] obs [SEP]``), ``dropped`` the summary fields
    (of ``task, tried, code_state, pending``) the new context leaves out: the randomly dropped ones
    for ``structured_summary``, ``["tried", "code_state", "pending"]`` for ``lossy_summary``, ``[]``
    for ``recent`` / ``mask_observations`` (they keep raw turns). On every other step and at reset
    the key ``"compression"`` is **absent**. The wrapper writes no other info key, and never
    changes reward, ``terminated`` or ``truncated``.

    **compact.** An accepted ``compact`` is not passed to the env: no env step, reward 0,
    ``terminated = truncated = False``, the info is a copy of the last env info with
    ``step_tool_seconds=0.0``, ``tool_status="ok"`` (``turn`` is unchanged) plus
    ``"compression"``; ``tokens_before`` includes the ``compact`` action's own tokens
    (``1 + 1`` with its EOS). It costs the agent a turn of its own (tokens, a trajectory step)
    but not an env turn: the env's ``max_turns`` counts env steps only, so an episode has at most
    ``max_turns + max_compactions`` agent actions. A ``compact`` that is refused (strategy
    ``none``, the cap reached, or the previous step already compressed) is passed to the env
    unchanged, where it is an ordinary unknown action (a format error costing an env turn), so
    nothing is free once the cap is reached. A ``compact`` whose new context would not be shorter
    is refused the same way.

    **Limits.** Never compresses on two consecutive steps (guard), at most ``max_compactions``
    times per episode (cap; afterwards the context just grows and the env's own limits apply),
    never on a step that ended the episode. Strategy ``none`` makes the wrapper a pass-through.

    **Past actions** are rendered verbatim (whitespace collapsed); an action with a word outside
    the vocabulary (not producible by the policy) is rendered as ``( malformed action )``.

    Args:
        env: an env implementing ``task_statement() -> str`` and ``memory_facts() -> MemoryFacts``
            on ``env.unwrapped``.
        settings: the knobs below as a :class:`CompressionSettings`; or give the knobs as keywords
            (``ContextCompression(env, strategy="recent", keep_last=3)``), not both.
        strategy: a name in ``STRATEGIES``.
        trigger: ``"tokens"`` | ``"turns"`` | ``"action"``.
        budget_tokens, budget_fraction: the token trigger fires above ``fraction * budget``.
        every_turns: segment length for ``trigger="turns"`` (required there).
        keep_last: turns kept verbatim by ``recent`` / ``mask_observations`` (>= 1).
        max_compactions: cap per episode (>= 0).
        drop_prob: per-field drop probability of ``structured_summary`` (0..1); the draws use the
            wrapper's generator, seeded in ``reset(seed=...)``.
    """

    def __init__(self, env: gym.Env, settings: CompressionSettings | None = None, **knobs) -> None:
        if settings is not None and knobs:
            raise TypeError(f"ContextCompression takes settings or knobs, not both (got knobs {', '.join(knobs)})")
        s = settings if settings is not None else CompressionSettings(**knobs)
        gym.utils.RecordConstructorArgs.__init__(self, **asdict(s))
        gym.Wrapper.__init__(self, env)
        self.settings = s
        self._strategy = get_strategy(s.strategy)
        self.strategy = s.strategy
        _check_knobs(s.trigger, s.budget_tokens, s.budget_fraction, s.every_turns, s.keep_last, s.max_compactions,
                     s.drop_prob)
        self.trigger = s.trigger
        self.budget_tokens = s.budget_tokens
        self.budget_fraction = float(s.budget_fraction)
        self.every_turns = s.every_turns
        self.keep_last = s.keep_last
        self.max_compactions = s.max_compactions
        self.drop_prob = float(s.drop_prob)
        self.tokenizer = get_tokenizer()

        self.observation_space = _widened_space(env.observation_space)
        self._rng: np.random.Generator | None = None
        self._reset_state("")

    # ------------------------------------------------------------------ state
    def _reset_state(self, first_obs: str) -> None:
        self._log: list[tuple[str, str]] = []  # every env turn since reset
        self._latest = first_obs
        self._tokens = self.tokenizer.count(first_obs) + 2  # [BOS] obs_0 [SEP]
        self._segment_id = 0
        self._segment_turns = 0
        self._compactions = 0
        self._prev_compressed = False
        self._ended = False
        self._last_info: dict = {}

    @property
    def context_tokens(self) -> int:
        """Tokens of the current segment's context (the policy's ``[BOS] obs_0 [SEP] ...``)."""
        return self._tokens

    @property
    def segment_id(self) -> int:
        return self._segment_id

    @property
    def compactions(self) -> int:
        return self._compactions

    # ------------------------------------------------------------------ Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        if seed is not None:
            self._rng = np.random.default_rng([int(seed), 0xC0DE])
        elif self._rng is None:
            self._rng = np.random.default_rng()
        self._reset_state(obs)
        self._last_info = copy.deepcopy(info)
        return obs, info

    def step(self, action):
        if self._is_compact(action) and self._may_compress():
            tokens_before = self._tokens + self._count(action) + 1  # + the compact action and its EOS
            built = self._build(tokens_before)
            if built is not None:
                return self._compact_step(tokens_before, *built)
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._log.append((action, obs))
        self._latest = obs
        self._tokens += self._count(action) + 1 + self.tokenizer.count(obs) + 1
        self._segment_turns += 1
        self._ended = bool(terminated or truncated)
        built = None
        if not self._ended and self._may_compress() and self._trigger_fired():
            built = self._build(self._tokens)
        if built is not None:
            obs, record = self._apply(self._tokens, *built)
            info = {**info, "compression": record}
        else:
            self._prev_compressed = False
        self._last_info = copy.deepcopy(info)
        return obs, reward, terminated, truncated, info

    # ------------------------------------------------------------------ internals
    def _count(self, action) -> int:
        return self.tokenizer.count(action) if isinstance(action, str) else 0

    def _is_compact(self, action) -> bool:
        return isinstance(action, str) and [w for w in action.split(" ") if w] == [COMPACT_ACTION]

    def _may_compress(self) -> bool:
        return (
            self._strategy is not None
            and not self._ended
            and not self._prev_compressed
            and self._compactions < self.max_compactions
        )

    def _trigger_fired(self) -> bool:
        if self.trigger == "tokens":
            return self._tokens > self.budget_fraction * self.budget_tokens
        if self.trigger == "turns":
            return self._segment_turns >= self.every_turns
        return False  # "action": only an explicit `compact`

    def _compact_step(self, tokens_before: int, text: str, dropped: list):
        obs, record = self._apply(tokens_before, text, dropped)
        info = copy.deepcopy(self._last_info)
        info["step_tool_seconds"] = 0.0
        info["tool_status"] = "ok"
        info["compression"] = record
        self._last_info = copy.deepcopy(info)
        return obs, 0.0, False, False, info

    def _build(self, tokens_before: int) -> tuple[str, list] | None:
        """The strategy's new context and dropped fields, or None when it would not be shorter
        than the context it replaces (then nothing is compressed). ``TypeError`` when the env's
        ``memory_facts()`` is not a ``MemoryFacts``."""
        base = self.env.unwrapped
        facts = base.memory_facts()
        if not isinstance(facts, MemoryFacts):
            raise TypeError(f"{type(base).__name__}.memory_facts() returned {type(facts).__name__}; "
                            "allowed: envs.memory.MemoryFacts")
        request = CompressionRequest(
            task=base.task_statement(),
            facts=facts,
            turns=tuple(self._log),
            latest=self._latest,
            keep_last=self.keep_last,
            drop_prob=self.drop_prob,
            rng=self._rng,
        )
        text, dropped = self._strategy(request)
        if self.tokenizer.count(text) + 2 >= tokens_before:
            return None
        return text, list(dropped)

    def _apply(self, tokens_before: int, text: str, dropped: list) -> tuple[str, dict]:
        """Start the next segment from ``text``; the ``info["compression"]`` record."""
        text = clip_to_length(text, self.observation_space.max_length)
        self._compactions += 1
        self._segment_id += 1
        self._segment_turns = 0
        self._prev_compressed = True
        self._tokens = self.tokenizer.count(text) + 2  # the new segment's [BOS] obs [SEP]
        record = {
            "segment_id": self._segment_id,
            "tokens_before": int(tokens_before),
            "tokens_after": int(self._tokens),
            "dropped": list(dropped),
        }
        return text, record
