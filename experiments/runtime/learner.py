"""What the run loop (``experiments.runtime.loop.run``) asks of a learner: the one protocol the
one-agent learner (``experiments.runtime.one_agent.OneAgentLearner``) and the two-agent learner
(``experiments.runtime.pair.TwoAgentLearner``) implement.

The loop owns the run directory, resume, the logger, the budget, SIGTERM, the progress bar, the
metrics line's frame (``update``, ``algo``, the ``compute/*`` counters, ``compute/budget_fraction``)
and the summary's frame; a learner owns its models, rollout engines, evaluation and the fields
only it knows. Contract of one update, in this order::

    lr = learner.set_budget_fraction(f)   # f: budget spent BEFORE the update's rollouts
    batch = learner.collect(update)        # update = 0-based index; counts the batch into learner.meter
    metrics = learner.update(batch)        # the line's learner part (rollout/*, train/*, train/lr, ...)
    ev = learner.evaluate(final)           # eval/* at updates that evaluate (final: the last one)

``state_dict()`` / ``load_state_dict()`` hold the learner's part of a checkpoint (models,
optimizers, the meter, behaviour snapshots, a measured start evaluation); ``start_info()`` is the
start model's ``start_model/*`` summary fields; ``summary_extra()`` the learner's summary fields
after ``budget/amount``; ``close()`` releases engines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from algos.compute import ComputeMeter


@dataclass(frozen=True)
class Collected:
    """One update's rollouts: the ``trajectories`` (one-agent ``Trajectory``s or ``PairEpisode``s), the
    0-based ``update`` that collected them, the behaviour policy ``version`` that sampled them and
    the wall ``seconds`` collecting took."""

    trajectories: list[Any]
    update: int
    version: int
    seconds: float


class Learner(Protocol):
    """The learner side of the run loop (module docstring)."""

    meter: ComputeMeter
    #: where the ``compute/*`` counters sit in a metrics line: before the evaluation's keys (True,
    #: one agent) or after them (False, two agents); each run kind keeps its metrics.jsonl order
    counters_before_eval: bool

    def set_budget_fraction(self, fraction: float) -> float: ...

    def collect(self, update: int) -> Collected: ...

    def update(self, batch: Collected) -> dict: ...

    def evaluate(self, final: bool) -> dict: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...

    def start_info(self) -> dict: ...

    def summary_extra(self) -> dict: ...

    def close(self) -> None: ...


__all__ = ["Collected", "Learner"]
