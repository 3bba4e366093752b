"""Closed-form claims (C1-C5, C15, C16, C18, C25): small hand-sized inputs through the project's own
``algos`` functions (never a re-typed formula). Each ``measure_cNN()`` returns its frozen result
(:class:`experiments.claims.result.Measurement`): the measured values as fields and the row's
``what`` / ``measured`` texts. The expected numbers and the pass rule are the claim's test,
tagged ``@pytest.mark.claim("Cn")`` in tests/claims/test_closed_form.py
(:mod:`experiments.claims.tagged` runs it as the claim's row)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch

from algos.advantages import gae, group_advantages, group_mean_std
from algos.losses import aggregate, aggregation_weights, kl_estimate, ppo_clip_loss, sequence_ratios, token_ratios
from algos.metrics import mixed_group_probability
from experiments.claims.result import Measurement, fmt_list

F64 = torch.float64


def _values(x: torch.Tensor) -> tuple[float, ...]:
    return tuple(float(v) for v in x.detach().reshape(-1))


# ---------------------------------------------------------------------------------------------- C1
@dataclass(frozen=True)
class C1Result(Measurement):
    """Token ratios, their product (the sequence ratio), their geometric mean (GSPO) and the
    token-level surrogate with A = 1."""

    what: ClassVar[str] = "token vs sequence ratio, old [.5,.25,.5] new [.6,.2,.6]"

    token_ratios: tuple[float, ...]
    product: float
    geometric: float
    token_objective: float

    @property
    def measured(self) -> str:
        return (f"token ratios {fmt_list(self.token_ratios)}; product {self.product:.4g}; token-level surrogate (A=1) "
                f"{self.token_objective:.4g} != {self.product:.4g}; geometric mean (GSPO) {self.geometric:.4g}")


def measure_c1() -> C1Result:
    """Token ratios, their product (sequence ratio), the geometric mean (GSPO) and the token-level
    surrogate with A = 1 (clip 0.25, not active) for old [.5, .25, .5] and new [.6, .2, .6]."""
    old = torch.tensor([[0.5, 0.25, 0.5]], dtype=F64).log()
    new = torch.tensor([[0.6, 0.2, 0.6]], dtype=F64).log()
    mask = torch.ones_like(old, dtype=torch.bool)
    per_token = token_ratios(new, old)[0]
    loss, _ = ppo_clip_loss(per_token, torch.ones(3, dtype=F64), clip_low=0.25, clip_high=0.25)
    return C1Result(token_ratios=_values(per_token), product=float(sequence_ratios(new, old, mask)[0]),
                    geometric=float(sequence_ratios(new, old, mask, length_normalized=True)[0]),
                    token_objective=float(-loss.mean()))


# ---------------------------------------------------------------------------------------------- C2
@dataclass(frozen=True)
class C2Result(Measurement):
    """Group mean, population std and advantages of one group's rewards."""

    what: ClassVar[str] = "GRPO group advantage, population std, r=[0,0,1,1]"

    mean: float
    std: float
    advantages: tuple[float, ...]

    @property
    def measured(self) -> str:
        return f"mean {self.mean:.4g}, std {self.std:.4g}, advantages {fmt_list(self.advantages)}"


def measure_c2() -> C2Result:
    """Group mean, population std and advantages of rewards [0, 0, 1, 1] (one group)."""
    rewards = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64)
    ids = torch.zeros(4, dtype=torch.int64)
    mean, std, _ = group_mean_std(rewards, ids, std="population")
    return C2Result(mean=float(mean[0]), std=float(std[0]),
                    advantages=_values(group_advantages(rewards, ids, std="population")))


# ---------------------------------------------------------------------------------------------- C3
@dataclass(frozen=True)
class SameRewardGroup:
    """One all-same group on the tiny policy: its rewards, advantages and the max |grad| of the
    task-reward term and of the k3 KL term."""

    rewards: tuple[float, ...]
    advantages: tuple[float, ...]
    task_grad: float
    kl_grad: float


@dataclass(frozen=True)
class C3Result(Measurement):
    """The all-0 and the all-1 group (:class:`SameRewardGroup`)."""

    what: ClassVar[str] = "all-same groups [0,0,0,0], [1,1,1,1]; autograd on a tiny policy"

    groups: tuple[SameRewardGroup, ...]

    @property
    def measured(self) -> str:
        return "; ".join(f"r={fmt_list(g.rewards)}: A={fmt_list(g.advantages)}, max abs grad: task term "
                         f"{g.task_grad:.3g}, k3 KL term {g.kl_grad:.3g}" for g in self.groups)


def _tiny_policy_grads(rewards: list[float]) -> SameRewardGroup:
    """4 responses x 2 tokens from a 3-word softmax policy theta; old = current (ratios 1), frozen
    reference != current: the advantages and the max |grad| of the task-reward term and of k3 KL."""
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=F64, requires_grad=True)
    ref_logits = torch.tensor([0.0, 0.5, -0.5], dtype=F64)
    tokens = torch.tensor([[0, 1], [2, 2], [1, 0], [0, 2]])
    mask = torch.ones(4, 2, dtype=torch.bool)
    logp = torch.log_softmax(theta, dim=0)[tokens]
    ref_logp = torch.log_softmax(ref_logits, dim=0)[tokens]
    adv = group_advantages(torch.tensor(rewards, dtype=F64), torch.zeros(4, dtype=torch.int64))
    weights = aggregation_weights(mask, "token-mean").to(F64)
    pg_loss, _ = ppo_clip_loss(token_ratios(logp, logp.detach()), adv[:, None])
    (pg_grad,) = torch.autograd.grad(aggregate(pg_loss, weights), theta)
    logp = torch.log_softmax(theta, dim=0)[tokens]
    (kl_grad,) = torch.autograd.grad(aggregate(kl_estimate(logp, ref_logp, "k3"), weights), theta)
    return SameRewardGroup(rewards=tuple(rewards), advantages=_values(adv), task_grad=float(pg_grad.abs().max()),
                           kl_grad=float(kl_grad.abs().max()))


def measure_c3() -> C3Result:
    """:func:`_tiny_policy_grads` for the all-0 and the all-1 group."""
    return C3Result(groups=tuple(_tiny_policy_grads(r) for r in ([0.0] * 4, [1.0] * 4)))


# ---------------------------------------------------------------------------------------------- C4
@dataclass(frozen=True)
class C4Result(Measurement):
    """Advantages under three std conventions and a loss under two averaging conventions."""

    what: ClassVar[str] = "conventions: std ddof, std division, token vs sequence mean"

    population: tuple[float, ...]
    sample: tuple[float, ...]
    raw: tuple[float, ...]
    token_mean: float
    seq_mean: float

    @property
    def measured(self) -> str:
        return (f"r=[0,0,1,1]: population std A={fmt_list(self.population)} vs sample std {fmt_list(self.sample)}; "
                f"no std division {fmt_list(self.raw)}; loss [1] & [0,0,0]: token-mean {self.token_mean:.4g} vs "
                f"seq-mean {self.seq_mean:.4g}")


def measure_c4() -> C4Result:
    """Advantages of [0, 0, 1, 1] with population / sample / no std division (eps 0), and the
    token-mean vs sequence-mean of two responses: 1 token with loss 1, 3 tokens with loss 0."""
    rewards = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64)
    ids = torch.zeros(4, dtype=torch.int64)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    loss = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    return C4Result(population=_values(group_advantages(rewards, ids, std="population", eps=0.0)),
                    sample=_values(group_advantages(rewards, ids, std="sample", eps=0.0)),
                    raw=_values(group_advantages(rewards, ids, std="none")),
                    token_mean=float(aggregate(loss, aggregation_weights(mask, "token-mean"))),
                    seq_mean=float(aggregate(loss, aggregation_weights(mask, "seq-mean-token-mean"))))


# ---------------------------------------------------------------------------------------------- C5
C5_BAD_INPUTS = ((1.5, 8), (-0.1, 8), (0.5, True), (0.5, 0), (0.5, 8.0))


@dataclass(frozen=True)
class C5Result(Measurement):
    """``P_mix`` per success probability at one group size, and which bad inputs were refused."""

    what: ClassVar[str] = "P_mix = 1 - p^G - (1-p)^G, G=8, and validation"

    group_size: int
    p_mix: Mapping[float, float]
    rejected: tuple[str, ...]
    tried: int

    @property
    def measured(self) -> str:
        shown = ", ".join(f"p={p}: {v:.1%}" for p, v in self.p_mix.items())
        return f"G={self.group_size}: {shown}; ValueError for {' '.join(self.rejected)}"


def measure_c5() -> C5Result:
    """``mixed_group_probability`` at G = 8 for p in (0.02, 0.2, 0.98), and which of
    :data:`C5_BAD_INPUTS` raise ``ValueError`` (``rejected``, as ``repr`` pairs)."""
    rejected = []
    for p, g in C5_BAD_INPUTS:
        try:
            mixed_group_probability(p, g)
        except ValueError:
            rejected.append(f"({p!r}, {g!r})")
    return C5Result(group_size=8, p_mix={p: mixed_group_probability(p, 8) for p in (0.02, 0.2, 0.98)},
                    rejected=tuple(rejected), tried=len(C5_BAD_INPUTS))


# --------------------------------------------------------------------------------------------- C15
@dataclass(frozen=True)
class C15Result(Measurement):
    """3-step GAE advantages at lambda 0.5 and 1, and the full return minus each value."""

    what: ClassVar[str] = "3-step GAE, r=[0,0,1], V=[.9,.3,.8], V'=[.3,.8,0], gamma 1"

    lambda_half: tuple[float, ...]
    lambda_one: tuple[float, ...]
    return_minus_value: tuple[float, ...]

    @property
    def measured(self) -> str:
        return f"lambda 0.5 -> {fmt_list(self.lambda_half)}; lambda 1 -> {fmt_list(self.lambda_one)} (= 1 - V)"


def measure_c15() -> C15Result:
    """3-step GAE with r = [0, 0, 1], V = [.9, .3, .8], V' = [.3, .8, 0], terminated at the end,
    gamma 1, lambda 0.5 and 1; and the full return minus V."""
    as_row = lambda xs: torch.tensor([xs], dtype=F64)  # noqa: E731
    rewards, values, next_values = as_row([0, 0, 1]), as_row([0.9, 0.3, 0.8]), as_row([0.3, 0.8, 0.0])
    terminated = torch.tensor([[False, False, True]])
    truncated = torch.zeros(1, 3, dtype=torch.bool)
    half, _ = gae(rewards, values, next_values, terminated, truncated, gamma=1.0, lam=0.5)
    one, _ = gae(rewards, values, next_values, terminated, truncated, gamma=1.0, lam=1.0)
    return C15Result(lambda_half=_values(half[0]), lambda_one=_values(one[0]),
                     return_minus_value=_values(1.0 - values[0]))


# --------------------------------------------------------------------------------------------- C16
@dataclass(frozen=True)
class C16Result(Measurement):
    """One-step GAE target and residual when a compression continues and when it is flagged
    terminal."""

    what: ClassVar[str] = "compression vs terminal flag, r=0, V=.6, V'=.8, gamma .9"

    continue_target: float
    continue_residual: float
    terminal_target: float
    terminal_residual: float

    @property
    def measured(self) -> str:
        return (f"compression (no flag): target {self.continue_target:.4g}, residual {self.continue_residual:+.4g}; "
                f"terminated: target {self.terminal_target:.4g}, residual {self.terminal_residual:+.4g}")


def measure_c16() -> C16Result:
    """One step r = 0, V = 0.6, V' = 0.8, gamma 0.9, lambda 0.95: GAE target and residual with no
    flag (a compression continues) and with ``terminated``."""
    reward, value, next_value = (torch.tensor([[x]], dtype=F64) for x in (0.0, 0.6, 0.8))
    no = torch.tensor([[False]])
    cont_adv, cont_target = gae(reward, value, next_value, no, no, gamma=0.9, lam=0.95)
    term_adv, term_target = gae(reward, value, next_value, ~no, no, gamma=0.9, lam=0.95)
    return C16Result(continue_target=float(cont_target), continue_residual=float(cont_adv),
                     terminal_target=float(term_target), terminal_residual=float(term_adv))


# --------------------------------------------------------------------------------------------- C18
@dataclass(frozen=True)
class C18Result(Measurement):
    """Task-mean and token-mean of one loss, whole and summed over micro-batches with global
    weights; the per-micro-batch token-mean and the per-segment mean."""

    what: ClassVar[str] = "slice weighting: task A 2 x loss 1, task B 6 x loss 3"

    task_mean: float
    token_mean: float
    splits: tuple[tuple[int, ...], ...]
    task_mean_micro: float
    token_mean_micro: float
    local: float
    per_segment: float

    @property
    def measured(self) -> str:
        splits = [list(s) for s in self.splits]
        return (f"task-mean {self.task_mean:.4g}, token-mean {self.token_mean:.4g}; micro-batches {splits} with "
                f"global weights: {self.task_mean_micro:.4g} / {self.token_mean_micro:.4g}; per-micro-batch token-mean "
                f"would give {self.local:.4g}, per-segment mean {self.per_segment:.4g}")


def measure_c18() -> C18Result:
    """Task A: 2 positions with loss 1 (row 0); task B: 6 positions with loss 3 in two segments of
    3 (rows 1, 2); padding to width 4. Task-mean and token-mean, the same summed over the
    micro-batches ``splits`` with global weights, a per-micro-batch token-mean averaged (``local``)
    and the per-segment mean."""
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 0]], dtype=torch.bool)
    loss = torch.tensor([[1.0] * 4, [3.0] * 4, [3.0] * 4]) * mask
    traj_ids = torch.tensor([0, 1, 1])
    w_task = aggregation_weights(mask, "task-mean", traj_ids)
    w_tok = aggregation_weights(mask, "token-mean")
    splits = ([0], [1, 2])
    local = sum(float(aggregate(loss[i], aggregation_weights(mask[i], "token-mean"))) for i in splits) / len(splits)
    return C18Result(task_mean=float(aggregate(loss, w_task)), token_mean=float(aggregate(loss, w_tok)),
                     splits=tuple(tuple(s) for s in splits),
                     task_mean_micro=sum(float(aggregate(loss[i], w_task[i])) for i in splits),
                     token_mean_micro=sum(float(aggregate(loss[i], w_tok[i])) for i in splits),
                     local=local, per_segment=float(aggregate(loss, aggregation_weights(mask, "seq-mean-token-mean"))))


# --------------------------------------------------------------------------------------------- C25
@dataclass(frozen=True)
class C25Result(Measurement):
    """Two tokens beyond the clip (A = +1 and -1): clipped flags, gradients, ratios and losses;
    at ratios 1, the k3 KL to a frozen reference and its largest gradient."""

    what: ClassVar[str] = "PPO clipping is not a KL penalty (autograd)"

    clipped: tuple[bool, ...]
    grad: tuple[float, ...]
    ratio: tuple[float, ...]
    loss: tuple[float, ...]
    ratios_all_one: bool
    kl: float
    kl_grad_max: float

    @property
    def measured(self) -> str:
        return (f"r=1.5: A=+1 clipped, dL/dlogp {self.grad[0]:.3g}; A=-1 unclipped, dL/dlogp {self.grad[1]:.3g}; "
                f"ratios after loss {fmt_list(self.ratio)}; ratios all 1: k3 KL {self.kl:.3g}, max abs grad "
                f"{self.kl_grad_max:.3g}")


def measure_c25() -> C25Result:
    """Two tokens at ratio 1.5 (clip 0.2) with A = +1 and A = -1: which are clipped, dL/dlogp, the
    ratios after the loss and the losses; and with all ratios 1 (current = old), the k3 KL to a
    frozen reference and the max |grad| of it."""
    logp_old = torch.log(torch.tensor([0.4, 0.4], dtype=F64))
    logp_new = (logp_old + math.log(1.5)).requires_grad_(True)
    ratio = token_ratios(logp_new, logp_old)
    loss, clipped = ppo_clip_loss(ratio, torch.tensor([1.0, -1.0], dtype=F64), clip_low=0.2, clip_high=0.2)
    (grad,) = torch.autograd.grad(loss.sum(), logp_new)
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=F64, requires_grad=True)
    tokens = torch.tensor([0, 1, 2, 0])
    logp = torch.log_softmax(theta, 0)[tokens]
    ref_logp = torch.log_softmax(torch.tensor([0.0, 0.5, -0.5], dtype=F64), 0)[tokens]
    ratios_now = token_ratios(logp, logp.detach())
    kl = kl_estimate(logp, ref_logp, "k3").mean()
    (kl_grad,) = torch.autograd.grad(kl, theta)
    return C25Result(clipped=tuple(bool(c) for c in clipped), grad=_values(grad), ratio=_values(ratio),
                     loss=_values(loss), ratios_all_one=bool((ratios_now == 1).all()), kl=float(kl.detach()),
                     kl_grad_max=float(kl_grad.abs().max()))
