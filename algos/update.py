"""What the three steps of an update hand each other (``algos.trainer``): the models' forward
output, the inputs ``prepare_batch`` computes once, the ``advantages`` step's output, one update's
record, and the split-invariant accumulation of its logged numbers."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from algos import metric_keys as mk
from algos.batch import Batch


@dataclass(frozen=True)
class ForwardOutput:
    """One forward of the trainer's models: the policy's ``logits`` (``[B, T, V]``, or ``[n, V]``
    at the selected positions of ``forward_at``) and the ``values`` ``[B, T]`` of the separate
    critic or the value head (``None``: no value model, or values computed elsewhere)."""

    logits: Tensor
    values: Tensor | None = None


@dataclass
class UpdateInputs:
    """What ``prepare_batch`` computes once per update, before any optimizer step. Tensors are
    ``[R, T]`` and aligned to the token index (``algos.policy``: the log-prob of token ``t`` comes
    from the logits at ``t - 1``), 0 at index 0 and where noted."""

    # log pi_old(token) at the sampling temperature, weights at the start of the update; computed
    # on the loss tokens only (0 elsewhere: nothing reads log-probs of tokens outside the loss)
    old_logp: Tensor
    ref_logp: Tensor | None  # frozen reference model's log-probs on the loss tokens (None: no reference model)
    loss_mask: Tensor  # float 0/1: tokens in the policy loss (the sampled tokens, action_mask)
    # raw critic output (value of the prefix ending there) before this update's fitting, at the
    # positions ``value_positions`` marks (a separate critic computes only those; 0 elsewhere);
    # None without a critic, or when old_logp is taken from the first epoch (below)
    old_values: Tensor | None = None
    # True: old_logp is zeros here and optimize fills it from epoch 0's forwards, which run before
    # the first optimizer step (single minibatch), i.e. with exactly the old weights
    old_logp_from_first_epoch: bool = False
    # selection counts: train/masked_trajectories, train/trajectories (+ GRPO's groups / dropped)
    metrics: dict = field(default_factory=dict)


@dataclass
class Advantages:
    """The output of ``advantages(batch, inputs)``. ``[R, T]`` tensors are aligned to the token
    index; ``[N, L]`` ones are per trajectory and decision point (``layout``)."""

    tokens: Tensor  # [R, T] advantage of every loss token (0 off the loss mask)
    per_trajectory: Tensor | None = None  # [N] GRPO's group-relative outcome advantages
    returns: Tensor | None = None  # [R, T] PPO value targets (GAE returns) at the decision points
    value_mask: Tensor | None = None  # [R, T] float 1 at the decision points (where the value loss applies)
    old_values: Tensor | None = None  # [R, T] V before fitting, at the decision token (``shift_values``)
    layout: object | None = None  # PPO and step methods: the decision points (an algos.decisions.GAELayout)
    point_advantages: Tensor | None = None  # [N, L] GAE advantages (before normalisation)
    point_returns: Tensor | None = None  # [N, L] GAE returns
    metrics: dict = field(default_factory=dict)  # train/adv_* and critic/* of this batch


@dataclass
class UpdateRecord:
    """One update as ``update_record`` ran it: its metrics and the three steps' outputs (None
    when the update was skipped). ``inputs.old_logp`` is complete (filled by the first epoch when
    fused)."""

    metrics: dict
    batch: Batch | None = None
    inputs: UpdateInputs | None = None
    advantages: Advantages | None = None


class UpdateStats:
    """Split-invariant accumulation of an update's logged numbers.

    ``step_part(name, x)``: ``x`` is one slice's weighted share of a loss; ``end_step`` closes an
    optimizer step. Logged: mean over steps of the per-step sums (the step's full loss), and of
    ``grad_norm``. ``tokens(name, values, mask)``: per-token values; logged as
    ``sum(values[mask]) / sum(mask)`` over the whole update. Only names that got data are logged.
    """

    def __init__(self) -> None:
        self._step: dict[str, float] = {}
        self._steps: dict[str, list[float]] = {}
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    def step_part(self, name: str, value: float) -> None:
        self._step[name] = self._step.get(name, 0.0) + float(value)

    def end_step(self, grad_norm: float, grad_norm_name: str = "grad_norm") -> None:
        for name, value in {**self._step, grad_norm_name: float(grad_norm)}.items():
            self._steps.setdefault(name, []).append(value)
        self._step = {}

    def tokens(self, name: str, values: Tensor, mask: Tensor) -> None:
        self._sums[name] = self._sums.get(name, 0.0) + float(values.detach()[mask].double().sum())
        self._counts[name] = self._counts.get(name, 0) + int(mask.sum())

    def metrics(self, prefix: str = mk.TRAIN) -> dict[str, float]:
        out = {f"{prefix}{k}": sum(v) / len(v) for k, v in self._steps.items()}
        out.update({f"{prefix}{k}": self._sums[k] / n for k, n in self._counts.items() if n > 0})
        return out


__all__ = ["Advantages", "ForwardOutput", "UpdateInputs", "UpdateRecord", "UpdateStats"]
