"""The policy's shape (:class:`PolicyShape`): vocabulary, width, depth, heads, context length and
critic kind. A leaf of ``algos``: the model (``algos.policy``) and its KV cache
(``algos.kv_cache``) both read it, so neither has to import the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

CRITIC_KINDS = ("none", "head", "separate")


@dataclass
class PolicyShape:
    """The model's shape (mirrors ``experiments.runtime.schema.PolicyConfig``'s architecture fields)."""

    vocab_size: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_len: int = 512
    mlp_ratio: int = 4
    critic: str = "none"  # none | head | separate
    tie_embeddings: bool = True

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"policy.d_model={self.d_model} must be divisible by policy.n_heads={self.n_heads}"
            )
        if self.critic not in CRITIC_KINDS:
            raise ValueError(f"policy.critic={self.critic!r} unknown; allowed: {', '.join(CRITIC_KINDS)}")


__all__ = ["CRITIC_KINDS", "PolicyShape"]
