"""The compute counters of metrics.jsonl / summary.json that serve as x-axes: the W&B logger
defines them as step metrics and the report interpolates success curves over them (declared in the
metric contract, ``algos/metric_keys.py``)."""

from __future__ import annotations

from algos.metric_keys import COMPUTE_AXES

__all__ = ["COMPUTE_AXES"]
