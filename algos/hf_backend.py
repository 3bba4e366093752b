"""Any Hugging Face causal LM as the policy: ``HFBackend`` (``algos.backend.PolicyBackend``).

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

The model (``HFPolicy``, the trainer-facing module): ``AutoModelForCausalLM`` plus, for PPO, a
value head ``Linear(hidden, 1)`` on the last hidden state. ``dtype`` / ``device`` "auto": CUDA and
bfloat16 when present, else CPU float32. Sampling keeps one Hugging Face KV cache per row
(``RowCache``): a prefill feeds a row's new context ids in one forward, a decode step one id.
Behaviour log-probs are taken by the engine at the sampling temperature from these logits.

torch / transformers are imported inside this module only (``import algos`` never imports it).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch
from torch import nn

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
    def _head(self) -> list[dict]:
        return [{"role": "system", "content": self.system}] if self.system is not None else []

    def ids(self, messages: list[dict], generation_prompt: bool) -> list[int]:
        text = self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
        return list(self.tok(text, add_special_tokens=False)["input_ids"])

    def suffix(self, obs: str) -> list[int]:
        """``next(obs)`` uncut: rendering of a later user turn after an assistant turn, minus the
        rendering up to and including the end-of-turn id closing that assistant turn."""
        conv = [*self._head(), {"role": "user", "content": DUMMY_USER}, {"role": "assistant", "content": DUMMY_ASSISTANT}]
        prefix = self.ids(conv, False)
        full = self.ids([*conv, {"role": "user", "content": obs}], True)
        cut = _after_last(prefix, self.end_id)
        if full[:cut] != prefix[:cut]:
            raise ValueError("chat template is not prefix-preserving: adding a user turn re-renders the earlier turns")
        return full[cut:]

    # ----- ContextLayout ----------------------------------------------------------------------
    def first(self, obs: str, limit: int) -> tuple[list[int], list[int]]:
        obs = self._fit(obs, limit, lambda o: self.ids([*self._head(), {"role": "user", "content": o}], True))
        ids = self.ids([*self._head(), {"role": "user", "content": obs}], True)
        return ids, list(self.tok(obs, add_special_tokens=False)["input_ids"])

    def next(self, obs: str, limit: int | None = None) -> list[int]:
        if limit is not None:
            obs = self._fit(obs, limit, self.suffix)
        return self.suffix(obs)

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
    head = layout._head()
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


class RowCache:
    """One Hugging Face KV cache per row (``None``: empty); ``reset_rows`` empties rows."""

    def __init__(self, rows: int) -> None:
        self.past: list = [None] * rows
        self.lengths = [0] * rows

    def reset_rows(self, rows) -> None:
        for b in rows:
            self.past[int(b)] = None
            self.lengths[int(b)] = 0


class HFPolicy(nn.Module):
    """The trainer-facing module: a causal LM and an optional value head on its last hidden state."""

    def __init__(self, lm, value_head: bool = False) -> None:
        super().__init__()
        self.lm = lm
        cfg = lm.config
        hidden = int(cfg.hidden_size)
        self.value_head = nn.Linear(hidden, 1).to(lm.device, lm.dtype) if value_head else None
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
        self.shape = PolicyShape(vocab_size=int(cfg.vocab_size), d_model=hidden, n_layers=int(cfg.num_hidden_layers),
                                 n_heads=int(cfg.num_attention_heads),
                                 max_len=int(getattr(cfg, "max_position_embeddings", 2048)),
                                 critic="head" if value_head else "none")

    def _hidden(self, tokens: torch.Tensor) -> torch.Tensor:
        dev = self.lm.device
        return self.lm.base_model(input_ids=tokens.to(dev), use_cache=False).last_hidden_state

    def forward(self, tokens: torch.Tensor, detach_value: bool = False):
        """``tokens [B, T]`` (right-padded; causal, so padding never changes real positions) ->
        ``(logits [B, T, V] float, values [B, T] | None)`` on ``tokens``' device."""
        h = self._hidden(tokens)
        logits = self.lm.get_output_embeddings()(h).float().to(tokens.device)
        values = None
        if self.value_head is not None:
            values = self.value_head(h.detach() if detach_value else h).squeeze(-1).float().to(tokens.device)
        return logits, values

    def forward_at(self, tokens: torch.Tensor, want: torch.Tensor, detach_value: bool = False):
        """Logits ``[n, V]`` only at the positions before the ids marked by ``want [B, T]``
        (row-major; ``want[:, 0]`` must be False) and values ``[B, T] | None``."""
        if bool(want[:, 0].any()):
            raise ValueError("forward_at: want[:, 0] must be False (the first token has no preceding logits)")
        h = self._hidden(tokens)
        b_idx, t_idx = torch.nonzero(want, as_tuple=True)
        dev = h.device
        logits = self.lm.get_output_embeddings()(h[b_idx.to(dev), (t_idx - 1).to(dev)]).float().to(tokens.device)
        values = None
        if self.value_head is not None:
            values = self.value_head(h.detach() if detach_value else h).squeeze(-1).float().to(tokens.device)
        return logits, values

    def n_params(self) -> int:
        """Matmul parameters: all but the input embedding table (counted once when tied to the head)."""
        seen, total = set(), 0
        emb = self.lm.get_input_embeddings().weight
        tied = emb is self.lm.get_output_embeddings().weight
        for p in self.parameters():
            if id(p) in seen or (p is emb and not tied):
                continue
            seen.add(id(p))
            total += p.numel()
        return total


class HFBackend:
    """``algos.backend.PolicyBackend`` over a local Hugging Face model directory."""

    def __init__(self, path: str | Path, value_head: bool = False, device: str = "auto", dtype: str = "auto",
                 end_token: str | None = None, system: str | None = None) -> None:
        from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

        path = Path(path)
        if not (path / "config.json").exists():
            raise ValueError(f"policy.path={str(path)!r} is not a Hugging Face model directory (no config.json)")
        self.device, self.dtype = resolve_device_dtype(device, dtype)
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
        if not self.tokenizer.chat_template:
            raise ValueError(f"tokenizer of {str(path)!r} has no chat_template")
        lm = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype).to(self.device)
        self.module = HFPolicy(lm, value_head=value_head)
        self.layout = ChatLayout(self.tokenizer, end_token, system, vocab_size=int(lm.config.vocab_size))
        # transformers >= 5.24 names the KV-cache argument ``cache``; earlier versions ``past_key_values``
        self._cache_arg = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"

    def new_cache(self, rows: int) -> RowCache:
        return RowCache(rows)

    @torch.no_grad()
    def step_last(self, cache: RowCache, tokens: torch.Tensor, n_new: torch.Tensor) -> torch.Tensor:
        lm = self.module.lm
        out = torch.zeros(tokens.shape[0], lm.config.vocab_size)
        for b, n in enumerate(n_new.tolist()):
            if n == 0:
                continue
            ids = tokens[b, :n][None].to(self.device)
            res = lm(input_ids=ids, use_cache=True, logits_to_keep=1, **{self._cache_arg: cache.past[b]})
            cache.past[b] = getattr(res, self._cache_arg)
            cache.lengths[b] += n
            out[b] = res.logits[0, -1].float().cpu()
        return out

    def forward_at(self, tokens, want, detach_value: bool = False):
        return self.module.forward_at(tokens, want, detach_value=detach_value)

    def n_params(self) -> int:
        return self.module.n_params()


__all__ = ["ChatLayout", "HFBackend", "HFPolicy", "RowCache", "check_template", "resolve_device_dtype"]
