"""A run's peak memory, estimated from the model's shape and the run's budgets before any compute.

    estimate = estimate_peak(c)        # PeakEstimate: the terms below, in bytes
    check_fits(c)                      # ConfigError (one line, naming the knob) when it cannot fit

The terms (``b`` bytes per element of the model's dtype; ``L`` blocks of width ``h``, MLP width
``i``, ``a`` heads, ``k`` key/value heads of size ``d``; ``V`` vocabulary; ``W = policy.max_len``):

    weights      P * b                      P parameters (x 2 with a frozen reference model)
    optimizer    3 * P_train * 4            the trainable parameters' gradient and AdamW moments
    activations  T * L * b * (12 h + 4 i + 2 a W)
    logits       T * V * 4 * 2              logits and log-softmax of the positions a slice scores
    kv cache     N * C * L * 2 * k * d * b  N rows sampled at once (build.sampling_rows), C columns each
    runtime      RUNTIME_BYTES              the interpreter, torch and the env

``C = cache_columns(W) = compact_width(W) + W`` (``experiments.runtime.build``): the sampling
cache's rows share one column layout with holes, compacted after a step that leaves it wider
than ``compact_width`` of its longest row, and one step appends at most ``W`` columns more.
``T`` is the largest micro-batch in token positions: ``policy.micro_batch_tokens`` (at least one
row of ``W``: a row is never split), else the row caps times ``W``
(``max(warmstart.batch_rows, algo.micro_batch_rows) * W``). The activation term counts what a
pre-norm block keeps for its backward (norm inputs and outputs, q / k / v / rotary, attention
output, residuals: ~12 h; gate, up, their product and the activation: ~4 i; attention scores and
probabilities: 2 a W per position when the attention is not fused). It is an upper bound by
design: every row at the window's length, every position scored. docs/own-model.md sets it
beside the measured peak resident set of each documented command.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path

import psutil

from algos.configs import ConfigError

GIB = 1024 ** 3
#: the interpreter, torch's and transformers' modules, the env and the run's bookkeeping
RUNTIME_BYTES = int(0.6 * GIB)
#: the share of the machine's memory a run may plan to use
FIT_SHARE = 0.9


@dataclass(frozen=True)
class ModelDims:
    """What the estimate reads of a model."""

    layers: int
    hidden: int
    mlp: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    params: int
    trainable: int
    dtype_bytes: int


@dataclass(frozen=True)
class PeakEstimate:
    weights: int
    optimizer: int
    activations: int
    logits: int
    kv_cache: int
    runtime: int
    tokens: int  # T, the largest micro-batch in token positions

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self) if f.name != "tokens")

    def line(self) -> str:
        parts = ", ".join(f"{f.name} {getattr(self, f.name) / GIB:.1f}" for f in fields(self) if f.name != "tokens")
        return f"{self.total / GIB:.1f} GiB ({parts})"


def _block_params(h: int, i: int, heads: int, kv: int, d: int) -> tuple[int, int]:
    """``(weights, all-linear LoRA parameters per rank)`` of one Llama-style block."""
    q, kvw = heads * d, kv * d
    weights = h * q + 2 * h * kvw + q * h + 3 * h * i + 2 * h
    lora = (h + q) + 2 * (h + kvw) + (q + h) + 2 * (h + i) + (i + h)
    return weights, lora


def hf_dims(path: str, lora_r: int, dtype_bytes: int) -> ModelDims | None:
    """The dims of a local Hugging Face model directory's ``config.json`` (None for a hub id)."""
    cfg_path = Path(path) / "config.json"
    if not cfg_path.is_file():
        return None
    cfg = json.loads(cfg_path.read_text())
    h, i, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads", heads)
    d = cfg.get("head_dim") or h // heads
    v = cfg["vocab_size"]
    block, lora = _block_params(h, i, heads, kv, d)
    params = layers * block + v * h * (1 if cfg.get("tie_word_embeddings", True) else 2) + h
    trainable = layers * lora * lora_r + h + 1 if lora_r > 0 else params
    return ModelDims(layers, h, i, heads, kv, d, v, params, trainable, dtype_bytes)


def tiny_dims(c) -> ModelDims:
    """The dims of the tiny policy (``algos.policy.PolicyModel``: full attention, every weight trains)."""
    from experiments.runtime.build import policy_shape

    s = policy_shape(c)
    h, i = s.d_model, s.d_model * s.mlp_ratio
    block, _ = _block_params(h, i, s.n_heads, s.n_heads, h // s.n_heads)
    params = s.n_layers * block + s.vocab_size * h + s.max_len * h
    return ModelDims(s.n_layers, h, i, s.n_heads, s.n_heads, h // s.n_heads, s.vocab_size, params, params, 4)


def model_dims(c) -> ModelDims | None:
    if c.policy.kind == "tiny":
        return tiny_dims(c)
    from algos.hf_backend import resolve_device_dtype

    _, dtype = resolve_device_dtype(c.policy.device, c.policy.dtype)
    return hf_dims(c.policy.path, c.policy.lora_r, dtype.itemsize)


def micro_batch_positions(c) -> int:
    """``T``: the largest micro-batch in token positions (module docstring)."""
    window = c.policy.max_len
    rows = max(c.warmstart.batch_rows, c.algo.micro_batch_rows)
    if c.policy.micro_batch_tokens is None:
        return rows * window
    return min(rows * window, max(c.policy.micro_batch_tokens, window))


def estimate_peak(c) -> PeakEstimate | None:
    """The run's peak memory terms (module docstring); None when the model's shape is not local."""
    from experiments.runtime.build import cache_columns, sampling_rows

    m = model_dims(c)
    if m is None:
        return None
    t, w, b = micro_batch_positions(c), c.policy.max_len, m.dtype_bytes
    copies = 2 if getattr(c.algo, "kl_coef", 0.0) > 0 else 1
    return PeakEstimate(
        weights=m.params * b * copies,
        optimizer=3 * m.trainable * 4,
        activations=t * m.layers * b * (12 * m.hidden + 4 * m.mlp + 2 * m.heads * w),
        logits=t * m.vocab * 4 * 2,
        kv_cache=sampling_rows(c) * cache_columns(w) * m.layers * 2 * m.kv_heads * m.head_dim * b,
        runtime=RUNTIME_BYTES,
        tokens=t,
    )


def machine_bytes() -> int:
    """The memory this process may use: ``AGENTRL_MEMORY_GIB`` when set, else the machine's RAM."""
    override = os.environ.get("AGENTRL_MEMORY_GIB")
    return int(float(override) * GIB) if override else int(psutil.virtual_memory().total)


def check_fits(c, available: int | None = None) -> PeakEstimate | None:
    """``ConfigError`` when the estimate exceeds ``FIT_SHARE`` of ``available`` (default
    :func:`machine_bytes`), naming the knob that bounds the largest term; else the estimate."""
    est = estimate_peak(c)
    if est is None:
        return None
    limit = int(FIT_SHARE * (available if available is not None else machine_bytes()))
    if est.total <= limit:
        return est
    from experiments.runtime.build import sampling_rows

    if est.kv_cache > est.activations:
        now = c.policy.sample_tokens
        knob = f"policy.sample_tokens (now {'null: rollout.num_envs rows' if now is None else now}, {sampling_rows(c)} rows)"
    else:
        now = c.policy.micro_batch_tokens
        knob = f"policy.micro_batch_tokens (now {'null: rows x max_len' if now is None else now}, {est.tokens} positions)"
    where = "AGENTRL_MEMORY_GIB" if os.environ.get("AGENTRL_MEMORY_GIB") and available is None else "this machine's memory"
    raise ConfigError(f"estimated peak memory {est.line()} exceeds {limit / GIB:.1f} GiB ({FIT_SHARE:.0%} of {where}); "
                      f"lower {knob}")


__all__ = ["FIT_SHARE", "GIB", "ModelDims", "PeakEstimate", "RUNTIME_BYTES", "check_fits", "estimate_peak",
           "hf_dims", "machine_bytes", "micro_batch_positions", "model_dims", "tiny_dims"]
