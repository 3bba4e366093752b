"""The policy's shape (:class:`PolicyShape`): vocabulary, width, depth, heads, context length and
critic kind. A leaf of ``algos``: the model (``algos.policy``) and its KV cache
(``algos.kv_cache``) both read it, so neither has to import the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

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
    # a separate critic's trunk width and depth (None = the policy's)
    critic_d_model: int | None = None
    critic_n_layers: int | None = None

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(
                f"policy.d_model={self.d_model} must be divisible by policy.n_heads={self.n_heads}"
            )
        if self.critic not in CRITIC_KINDS:
            raise ValueError(f"policy.critic={self.critic!r} unknown; allowed: {', '.join(CRITIC_KINDS)}")
        if self.critic_d_model is not None and (self.critic_d_model < 1 or self.critic_d_model % self.n_heads):
            raise ValueError(f"policy.critic_d_model={self.critic_d_model} must be >= 1 and divisible by "
                             f"policy.n_heads={self.n_heads}")
        if self.critic_n_layers is not None and self.critic_n_layers < 1:
            raise ValueError(f"policy.critic_n_layers={self.critic_n_layers} must be >= 1")

    def critic_trunk(self) -> "PolicyShape":
        """The shape of a separate critic's trunk: this shape with ``critic_d_model`` /
        ``critic_n_layers`` where they are set."""
        return replace(self, d_model=self.critic_d_model or self.d_model, n_layers=self.critic_n_layers or self.n_layers,
                       critic_d_model=None, critic_n_layers=None)


__all__ = ["CRITIC_KINDS", "PolicyShape"]
