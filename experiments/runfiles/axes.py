"""The compute counters of metrics.jsonl / summary.json that serve as x-axes: the W&B logger
defines them as step metrics and the report interpolates success curves over them."""

from __future__ import annotations

#: The compute counters (cumulative, monotone) that serve as x-axes; see docs/interfaces.md.
COMPUTE_AXES: tuple[str, ...] = (
    "compute/rollouts",
    "compute/generated_tokens",
    "compute/observation_tokens",
    "compute/tool_seconds",
    "compute/train_flops",
    "compute/wall_seconds",
)

__all__ = ["COMPUTE_AXES"]
