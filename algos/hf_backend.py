"""Any Hugging Face causal LM as the policy: ``load_policy`` -> ``HFPolicy`` (the trainer-facing
module and its own ``algos.backend.PolicyBackend``).

Token in, token out. A segment's context is rendered once with the model's chat template:

    first(obs)  = ids(render([system?, user(obs)], add_generation_prompt=True))
    next(obs)   = ids(render([..., assistant(a), user(obs)], gen prompt)) - ids(render([..., assistant(a)]))
                  (the difference is taken after the end-of-turn id that closes the assistant turn,
                  so the template's own text after it, e.g. ChatML's "\\n", is env-written)

and an action is the sampled ids up to and including the end-of-turn id the model sampled; the env
receives ``decode(sampled ids without that id)``; sampled ids are never re-encoded, so the loss
mask is 1 on exactly the sampled ids. ``next`` is computed on a fixed dummy conversation: the
start-up check (``check_template``) proves the rendering prefix-preserving over turns, so the
suffix does not depend on the turns before it. A template that rewrites earlier turns, or whose
assistant turn is not closed by the end-of-turn id, raises a one-line ``ValueError``.

The model (``HFPolicy``): ``AutoModelForCausalLM`` (optionally with ``peft`` LoRA adapters) plus,
for PPO, a value head ``Linear(hidden, 1)`` on the last hidden state. ``dtype`` / ``device``
"auto": CUDA and bfloat16 when present, else CPU float32. Sampling keeps one batched KV cache for
all rows (``RowCache``): every engine step is one forward in which each row feeds its new ids
(a prefill of context ids, or one sampled id) at its own positions, and an attention mask hides
the columns that are not the row's own. Behaviour log-probs are taken by the engine at the
sampling temperature from these logits.

transformers and peft are imported inside the functions that need them: importing this module
(``experiments.runtime.build`` does) loads neither, and ``import algos`` never imports it.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from algos.batch import MIN_SHARED_PREFIX, common_prefix_length, shared_prefix_length
from algos.shape import PolicyShape

DUMMY_USER, DUMMY_ASSISTANT = "u", "a"


def resolve_device_dtype(device: str = "auto", dtype: str = "auto") -> tuple[torch.device, torch.dtype]:
    """``("auto", "auto")`` -> CUDA + bfloat16 when CUDA (with bf16) is present, else CPU + float32."""
    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dtype == "auto":
        bf16 = dev.type == "cuda" and torch.cuda.is_bf16_supported()
        return dev, torch.bfloat16 if bf16 else torch.float32
    if dtype not in dtypes:
        raise ValueError(f"policy.dtype={dtype!r} unknown; allowed: auto, {', '.join(dtypes)}")
    return dev, dtypes[dtype]


class ChatLayout:
    """``algos.backend.ContextLayout`` from a fast tokenizer and its chat template."""

    def __init__(self, tokenizer, end_token: str | None = None, system: str | None = None,
                 vocab_size: int | None = None) -> None:
        self.tok = tokenizer
        self.system = system
        end_token = end_token or tokenizer.eos_token
        if end_token is None:
            raise ValueError("the tokenizer has no eos_token; pass end_token (the end-of-turn token)")
        end_id = tokenizer.convert_tokens_to_ids(end_token)
        if end_id is None or end_id == tokenizer.unk_token_id:
            raise ValueError(f"end_token {end_token!r} is not a token of the tokenizer")
        if vocab_size is not None and end_id >= vocab_size:
            raise ValueError(f"end_token {end_token!r} (id {end_id}) is outside the model's vocabulary of {vocab_size}")
        self.end_id = int(end_id)
        self.end_ids = frozenset({self.end_id})
        self.capped_close = [self.end_id]
        check_template(self)

    # ----- rendering --------------------------------------------------------------------------
    def head(self) -> list[dict]:
        """The messages before the first user turn: the system message, when one is set."""
        return [{"role": "system", "content": self.system}] if self.system is not None else []

    def ids(self, messages: list[dict], generation_prompt: bool) -> list[int]:
        text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def suffix(self, obs: str) -> list[int]:
        """``next(obs)`` uncut: rendering of a later user turn after an assistant turn, minus the
        rendering up to and including the end-of-turn id closing that assistant turn."""
        conv = [*self.head(), {"role": "user", "content": DUMMY_USER}, {"role": "assistant", "content": DUMMY_ASSISTANT}]
        prefix = self.ids(conv, False)
        full = self.ids([*conv, {"role": "user", "content": obs}], True)
        cut = _after_last(prefix, self.end_id)
        if full[:cut] != prefix[:cut]:
            raise ValueError("chat template is not prefix-preserving: adding a user turn re-renders the earlier turns")
        return full[cut:]

    # ----- ContextLayout ----------------------------------------------------------------------
    def first(self, obs: str, limit: int) -> tuple[list[int], list[int]]:
        obs = self._fit(obs, limit, lambda o: self.ids([*self.head(), {"role": "user", "content": o}], True))
        ids = self.ids([*self.head(), {"role": "user", "content": obs}], True)
        return ids, list(self.tok(obs, add_special_tokens=False)["input_ids"])

    def next(self, obs: str, limit: int | None = None) -> list[int]:
        if limit is not None:
            obs = self._fit(obs, limit, self.suffix)
        return self.suffix(obs)

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def action_ids(self, text: str) -> list[int]:
        return [*self.tok(text, add_special_tokens=False)["input_ids"], self.end_id]

    def action_text(self, ids: list[int], capped: bool) -> str:
        body = ids if capped else ids[:-1]
        return self.tok.decode(body, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    @staticmethod
    def _fit(obs: str, limit: int, render) -> str:
        """The longest end of ``obs`` (by characters) whose rendering has at most ``limit`` ids
        (the empty observation when even that does not fit)."""
        if len(render(obs)) <= limit:
            return obs
        lo, hi = 0, len(obs)  # keep obs[len - k:]: largest k that fits, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(render(obs[len(obs) - mid:])) <= limit:
                lo = mid
            else:
                hi = mid - 1
        return obs[len(obs) - lo:] if lo else ""


def _after_last(ids: list[int], token: int) -> int:
    """Index just after the last occurrence of ``token`` in ``ids`` (``ValueError`` when absent)."""
    for i in range(len(ids) - 1, -1, -1):
        if ids[i] == token:
            return i + 1
    raise ValueError(f"chat template does not close an assistant turn with the end-of-turn token id {token}")


def check_template(layout: ChatLayout) -> None:
    """Start-up check of the chat template (one-line ``ValueError`` naming the problem):

    1. prefix-preserving over turns: for conversations of 1..3 turns, the rendering with the
       generation prompt is a prefix of the rendering with the assistant's answer, and the
       rendering of ``k`` turns is a prefix of that of ``k + 1`` up to the end-of-turn id closing
       turn ``k``;
    2. the assistant's turn is closed by the end-of-turn id right after its content (an id the
       model samples), and that content is the generation prompt's continuation."""
    head = layout.head()
    msgs = list(head)
    prev_full = None
    for k in range(3):
        msgs.append({"role": "user", "content": f"observation {k}"})
        prompt = layout.ids(msgs, True)
        if prev_full is not None:
            cut = _after_last(prev_full, layout.end_id)
            if prompt[:cut] != prev_full[:cut]:
                raise ValueError(f"chat template is not prefix-preserving over turns: turn {k} re-renders earlier turns")
        answer = f"action {k}"
        msgs.append({"role": "assistant", "content": answer})
        full = layout.ids(msgs, False)
        if full[:len(prompt)] != prompt:
            raise ValueError(f"chat template is not prefix-preserving: the generation prompt of turn {k} "
                             "is not a prefix of the rendered assistant turn")
        body = full[len(prompt):]
        if layout.end_id not in body:
            raise ValueError(f"chat template does not close the assistant turn with the end-of-turn token "
                             f"{layout.tok.convert_ids_to_tokens(layout.end_id)!r}")
        text = layout.tok.decode(body[:body.index(layout.end_id)], skip_special_tokens=False)
        if text != answer:
            raise ValueError(f"chat template does not place the assistant content right before the end-of-turn "
                             f"token (got {text!r}, expected {answer!r})")
        prev_full = full


@functools.lru_cache(maxsize=1)
def _grow_layer_class():
    """A ``transformers`` cache layer whose keys / values are views of preallocated buffers that
    double when full, so appending copies only the new columns (``DynamicLayer`` concatenates the
    whole cache at every step). Built on first use: transformers is imported lazily."""
    from transformers.cache_utils import DynamicLayer

    class GrowLayer(DynamicLayer):
        buf_k = buf_v = None

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n = self.keys.shape[-2] if self.keys.dim() == 4 else 0
            need = n + key_states.shape[-2]
            if self.buf_k is None or need > self.buf_k.shape[-2]:
                cap = max(need, 2 * (self.buf_k.shape[-2] if self.buf_k is not None else 64))
                b, h, _, d = key_states.shape
                k = key_states.new_empty(b, h, cap, d)
                v = value_states.new_empty(b, h, cap, value_states.shape[-1])
                if n:
                    k[:, :, :n], v[:, :, :n] = self.keys, self.values
                self.buf_k, self.buf_v = k, v
            self.buf_k[:, :, n:need] = key_states
            self.buf_v[:, :, n:need] = value_states
            self.keys, self.values = self.buf_k[:, :, :need], self.buf_v[:, :, :need]
            return self.keys, self.values

        def replace(self, keys, values) -> None:
            """Hold exactly ``keys`` / ``values`` (after a compaction)."""
            self.buf_k, self.buf_v = keys.contiguous(), values.contiguous()
            self.keys, self.values = self.buf_k, self.buf_v

    return GrowLayer


#: the sampling cache compacts (``RowCache.compact``) once its width exceeds the longest row by a
#: quarter of that row plus this many columns, so the cache never holds more than
#: ``rows * compact_width(max_len)`` positions
COMPACT_SLACK_COLUMNS = 64


def compact_width(longest: int) -> int:
    """The widest a sampling cache whose longest row holds ``longest`` ids may grow before it is
    compacted: ``longest + longest // 4 + COMPACT_SLACK_COLUMNS``. Example: 640 -> 864."""
    return longest + longest // 4 + COMPACT_SLACK_COLUMNS


class RowCache:
    """The sampling cache of ``rows`` rows, batched: a ``transformers`` cache (``hf``; per layer
    keys and values ``[rows, heads, W, head_dim]``) and ``valid [rows, W]`` (which columns hold an
    id the row was fed), ``lengths`` (ids fed per row since its reset: the next id's position).
    Columns are appended for all rows at once, so a row holds holes (masked out) where another row
    fed more ids or it fed none; ``compact`` packs every row's valid columns to the left when the
    width passes :func:`compact_width` of the longest row. ``reset_rows`` empties rows (their columns become holes).

    ``share_prefix``: the first time at least two empty rows are fed ids that begin alike (at least
    :data:`MIN_SHARED_PREFIX` ids, e.g. the system prompt and a group's first observation), the
    keys and values of that common prefix are computed once (one row) and kept; every empty row
    whose ids begin with it, then or later in the batch, gets them copied in, and only the rest of
    its ids is fed. Attention sees the same keys and values at the same positions: the numbers
    equal the unshared path's up to float summation order."""

    def __init__(self, rows: int, share_prefix: bool = True) -> None:
        from transformers.cache_utils import Cache

        self.hf = Cache(layer_class_to_replicate=_grow_layer_class())
        self.valid = torch.zeros(rows, 0, dtype=torch.bool)
        self.lengths = torch.zeros(rows, dtype=torch.long)
        # the shared prefix (HFPolicy.step_last): its ids [P] and per layer keys / values [1, heads, P, d]
        self.share_prefix = share_prefix
        self.prefix_ids: torch.Tensor | None = None
        self.prefix_kv: list[tuple[torch.Tensor, torch.Tensor]] = []

    def reset_rows(self, rows) -> None:
        for b in rows:
            self.valid[int(b)] = False
            self.lengths[int(b)] = 0

    def compact(self) -> None:
        """Move each row's valid columns to the left (order kept) and cut the width to the longest
        row. Attention reads positions from the rotary-encoded keys and order only through the
        causal mask, under which every cached column precedes the next ids: numbers unchanged."""
        width = int(self.valid.sum(1).max()) if self.valid.numel() else 0
        order = torch.argsort((~self.valid).to(torch.int8), dim=1, stable=True)[:, :width]
        for layer in self.hf.layers:
            k, v = layer.keys, layer.values
            idx = order.to(k.device)[:, None, :, None]
            layer.replace(k.gather(2, idx.expand(-1, k.shape[1], -1, k.shape[3])),
                          v.gather(2, idx.expand(-1, v.shape[1], -1, v.shape[3])))
        self.valid = self.valid.gather(1, order)


class HFPolicy(nn.Module):
    """A Hugging Face causal LM as the policy: the trainer-facing module (``forward`` /
    ``forward_at`` / ``value_head`` / ``shape`` / ``n_params``) and its own
    ``algos.backend.PolicyBackend`` (``layout``, ``new_cache``, ``step_last``; ``module`` is the
    policy itself), so a copy of it (a behaviour snapshot, the KL reference) samples as it does.

    ``lm``: the causal LM (a ``peft`` model when LoRA adapters are attached: the trunk and head are
    then its base model's, with the adapters inside); ``value_head``: a zero-initialised
    ``Linear(hidden, 1)`` on the last hidden state (PPO)."""

    #: sampling and the training forward compute the ids rows begin with once (``RowCache``,
    #: ``_hidden``; ``policy.shared_prefix``)
    share_prefix: bool = True

    def __init__(self, lm, layout: ChatLayout, value_head: bool = False) -> None:
        super().__init__()
        self.lm = lm
        self.layout = layout
        causal = self.causal
        cfg = causal.config
        hidden = int(cfg.hidden_size)
        self.value_head = nn.Linear(hidden, 1).to(causal.device, causal.dtype) if value_head else None
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
        self.shape = PolicyShape(vocab_size=int(cfg.vocab_size), d_model=hidden, n_layers=int(cfg.num_hidden_layers),
                                 n_heads=int(cfg.num_attention_heads),
                                 max_len=int(getattr(cfg, "max_position_embeddings", 2048)),
                                 critic="head" if value_head else "none")
        # transformers >= 5.24 names the KV-cache argument ``cache``; earlier versions ``past_key_values``
        self._cache_arg = "cache" if "cache" in inspect.signature(causal.forward).parameters else "past_key_values"

    # ----- parts ------------------------------------------------------------------------------
    @property
    def causal(self):
        """The causal LM itself (under LoRA: the base model, whose layers hold the adapters)."""
        return self.lm.get_base_model() if hasattr(self.lm, "get_base_model") else self.lm

    @property
    def module(self) -> "HFPolicy":
        return self

    @property
    def device(self) -> torch.device:
        return self.causal.device

    def _hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        """The last hidden states ``[B, T, H]`` of right-padded ``tokens``. With ``share_prefix``,
        the ids every row begins with (at least :data:`MIN_SHARED_PREFIX`) are computed once
        (one row) and the rows attend to its keys and values: the same numbers up to float
        summation order, gradients flowing through the shared part once per row."""
        tokens = tokens.to(self.device)
        p = shared_prefix_length(tokens) if self.share_prefix else 0
        if not p:
            return self.causal.base_model(input_ids=tokens, use_cache=False).last_hidden_state
        from transformers.cache_utils import DynamicCache

        base, rows = self.causal.base_model, tokens.shape[0]
        prefix = DynamicCache()
        head = base(input_ids=tokens[:1, :p], use_cache=True, **{self._cache_arg: prefix}).last_hidden_state
        shared = DynamicCache()
        for i, layer in enumerate(prefix.layers):
            shared.update(layer.keys.expand(rows, -1, -1, -1), layer.values.expand(rows, -1, -1, -1), i)
        pos = torch.arange(p, tokens.shape[1], device=tokens.device)[None].expand(rows, -1)
        tail = base(input_ids=tokens[:, p:], position_ids=pos, use_cache=True, **{self._cache_arg: shared}).last_hidden_state
        return torch.cat([head.expand(rows, -1, -1), tail], dim=1)

    # ----- trainer ----------------------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, detach_value: bool = False):
        """``tokens [B, T]`` (right-padded; causal, so padding never changes real positions) ->
        ``(logits [B, T, V] float, values [B, T] | None)`` on ``tokens``' device."""
        h = self._hidden(tokens)
        logits = self.causal.get_output_embeddings()(h).float().to(tokens.device)
        return logits, self._values(h, tokens, detach_value)

    def forward_at(self, tokens: torch.Tensor, want: torch.Tensor, detach_value: bool = False):
        """Logits ``[n, V]`` only at the positions before the ids marked by ``want [B, T]``
        (row-major; ``want[:, 0]`` must be False) and values ``[B, T] | None``."""
        if bool(want[:, 0].any()):
            raise ValueError("forward_at: want[:, 0] must be False (the first token has no preceding logits)")
        h = self._hidden(tokens)
        b_idx, t_idx = torch.nonzero(want, as_tuple=True)
        dev = h.device
        logits = self.causal.get_output_embeddings()(h[b_idx.to(dev), (t_idx - 1).to(dev)]).float().to(tokens.device)
        return logits, self._values(h, tokens, detach_value)

    def _values(self, h: torch.Tensor, tokens: torch.Tensor, detach_value: bool) -> torch.Tensor | None:
        if self.value_head is None:
            return None
        return self.value_head(h.detach() if detach_value else h).squeeze(-1).float().to(tokens.device)

    def head_params(self) -> int:
        """The parameters of :meth:`n_params` applied after the last hidden state, at every position
        of every row even when a prefix is shared (the output head, the value head)."""
        head = self.causal.get_output_embeddings().weight.numel()
        return head + (sum(p.numel() for p in self.value_head.parameters()) if self.value_head is not None else 0)

    def n_params(self) -> int:
        """Matmul parameters (LoRA adapters and value head included): all but the input embedding
        table (counted once when tied to the output head)."""
        seen, total = set(), 0
        emb = self.causal.get_input_embeddings().weight
        tied = emb is self.causal.get_output_embeddings().weight
        for p in self.parameters():
            if id(p) in seen or (p is emb and not tied):
                continue
            seen.add(id(p))
            total += p.numel()
        return total

    # ----- sampling (PolicyBackend) -----------------------------------------------------------
    def new_cache(self, rows: int) -> RowCache:
        return RowCache(rows, share_prefix=self.share_prefix)

    def _prefix_kv(self, ids: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer the keys and values ``[1, heads, P, d]`` of ``ids [P]`` at positions 0..P-1."""
        from transformers.cache_utils import DynamicCache

        tmp = DynamicCache()
        self.causal.base_model(input_ids=ids[None].to(self.device), use_cache=True, **{self._cache_arg: tmp})
        return [(layer.keys, layer.values) for layer in tmp.layers]

    def _feed_shared_prefix(self, cache: RowCache, tokens: torch.Tensor, n: torch.Tensor):
        """Copy the cache's shared prefix into the empty rows whose new ids begin with it (finding
        it first, when two or more empty rows are fed); returns the ids and counts left to feed."""
        fresh = (cache.lengths == 0) & (n > 0)
        if cache.prefix_ids is None:
            rows = torch.nonzero(fresh).flatten()
            if len(rows) < 2:
                return tokens, n
            p = common_prefix_length(tokens[rows], n[rows])
            if p < MIN_SHARED_PREFIX:
                return tokens, n
            cache.prefix_ids = tokens[rows[0], :p].clone()
            cache.prefix_kv = self._prefix_kv(cache.prefix_ids)
        p = len(cache.prefix_ids)
        if tokens.shape[1] <= p:
            return tokens, n
        use = fresh & (n > p) & (tokens[:, :p] == cache.prefix_ids[None]).all(1)
        if not bool(use.any()):
            return tokens, n
        dev_use = use.to(self.device)
        for i, (k, v) in enumerate(cache.prefix_kv):
            keys = k.new_zeros(len(use), *k.shape[1:])
            values = v.new_zeros(len(use), *v.shape[1:])
            keys[dev_use], values[dev_use] = k[0], v[0]
            cache.hf.update(keys, values, i)
        cache.valid = torch.cat([cache.valid, use[:, None].expand(-1, p)], dim=1)
        cache.lengths = torch.where(use, torch.full_like(cache.lengths, p), cache.lengths)
        rest = tokens.clone()
        rest[use, :tokens.shape[1] - p] = tokens[use, p:]
        return rest, torch.where(use, n - p, n)

    @torch.no_grad()
    def step_last(self, cache: RowCache, tokens: torch.Tensor, n_new: torch.Tensor) -> torch.Tensor:
        """One forward over every row: row ``b``'s new ids ``tokens[b, :n_new[b]]`` at positions
        ``lengths[b], ...``, attending its own valid cached columns and its new ids (the attention
        mask hides holes, padding and other rows' ids); a row with ``n_new = 0`` feeds a dummy id
        that attends only itself and is recorded as a hole. Returns the logits at each row's last
        new id (zeros for rows with ``n_new = 0``)."""
        causal, dev = self.causal, self.device
        rows = tokens.shape[0]
        n = n_new.clamp(min=0)
        if cache.share_prefix:
            tokens, n = self._feed_shared_prefix(cache, tokens, n)
        width = max(int(n.max()), 1)
        cols = torch.arange(width)
        fed = cols[None, :] < n[:, None]  # [B, width]: real new ids
        head = tokens[:, :width]
        if head.shape[1] < width:
            head = torch.nn.functional.pad(head, (0, width - head.shape[1]))
        ids = torch.where(fed, head, torch.zeros_like(head))
        attend = fed.clone()
        attend[n == 0, 0] = True  # a dummy id must attend something: itself
        mask = torch.cat([cache.valid, attend], dim=1)
        pos = cache.lengths[:, None] + cols[None, :]
        res = causal.base_model(input_ids=ids.to(dev), attention_mask=mask.to(dev).long(), position_ids=pos.to(dev),
                                use_cache=True, **{self._cache_arg: cache.hf})
        cache.valid = torch.cat([cache.valid, fed], dim=1)
        cache.lengths = cache.lengths + n
        if cache.valid.shape[1] > compact_width(int(cache.valid.sum(1).max())):
            cache.compact()
        h = res.last_hidden_state
        last = (n - 1).clamp(min=0).to(h.device)
        logits = causal.get_output_embeddings()(h[torch.arange(rows, device=h.device), last]).float().cpu()
        return torch.where((n > 0)[:, None], logits, torch.zeros_like(logits))


@dataclass(frozen=True)
class LoraSpec:
    """LoRA adapters (``peft.LoraConfig``): rank ``r`` (0 = none: every weight trains), ``alpha``,
    ``dropout`` and the target modules (``"all-linear"`` or comma-separated module names)."""

    r: int = 0
    alpha: int = 16
    dropout: float = 0.0
    targets: str = "all-linear"

    @property
    def target_modules(self) -> str | list[str]:
        """``"all-linear"``, or the module names of ``targets`` (what ``peft.LoraConfig`` takes)."""
        return self.targets if self.targets == "all-linear" else [t.strip() for t in self.targets.split(",") if t.strip()]


def load_layout(path: str | Path, end_token: str | None = None, system: str | None = None) -> ChatLayout:
    """The chat layout of a Hugging Face model (local directory or hub id) without its weights:
    the fast tokenizer (``PreTrainedTokenizerFast``: ``AutoTokenizer`` can change ids when a model
    config sits beside the tokenizer), its chat template checked at start-up (``ChatLayout``) and
    the model config's vocabulary size. One-line ``ValueError`` for a missing chat template or end
    id, or a template that fails the check."""
    from transformers import AutoConfig, PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    if not tokenizer.chat_template:
        raise ValueError(f"tokenizer of {str(path)!r} has no chat_template")
    vocab = getattr(AutoConfig.from_pretrained(str(path)), "vocab_size", None)
    return ChatLayout(tokenizer, end_token, system, vocab_size=int(vocab) if vocab is not None else None)


def lora_target_problem(path: str | Path, targets: str) -> str | None:
    """None when every comma-separated name of ``targets`` ends some module name of the model at
    ``path`` (``"all-linear"`` always holds), else a one-line description naming the missing ones
    and the model's linear module names. The model is built on the meta device: no weights load."""
    if targets == "all-linear":
        return None
    from transformers import AutoConfig, AutoModelForCausalLM

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(str(path)))
    names = [n for n, _ in skeleton.named_modules()]
    wanted = LoraSpec(targets=targets).target_modules
    missing = [t for t in wanted if not any(n == t or n.endswith("." + t) for n in names)]
    if not missing:
        return None
    linear = sorted({n.rsplit(".", 1)[-1] for n, m in skeleton.named_modules() if isinstance(m, nn.Linear)})
    return f"LoRA targets {missing} are not modules of the model; its linear modules: {', '.join(linear)} (or all-linear)"


def load_policy(path: str | Path, value_head: bool = False, device: str = "auto", dtype: str = "auto",
                end_token: str | None = None, system: str | None = None, lora: LoraSpec | None = None) -> HFPolicy:
    """The policy of a Hugging Face model: a local directory or a hub id (``from_pretrained``),
    its chat layout (``load_layout``), placed on ``device`` in ``dtype`` ("auto":
    ``resolve_device_dtype``), LoRA adapters attached when ``lora.r > 0``."""
    from transformers import AutoModelForCausalLM

    dev, dt = resolve_device_dtype(device, dtype)
    layout = load_layout(path, end_token, system)
    lm = AutoModelForCausalLM.from_pretrained(str(path), dtype=dt).to(dev)
    if lora is not None and lora.r > 0:
        from peft import LoraConfig, get_peft_model

        lm = get_peft_model(lm, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                           target_modules=lora.target_modules, task_type="CAUSAL_LM"))
    return HFPolicy(lm, layout, value_head=value_head)


__all__ = ["ChatLayout", "HFPolicy", "LoraSpec", "RowCache", "check_template", "load_layout", "load_policy", "lora_target_problem",
           "resolve_device_dtype"]
