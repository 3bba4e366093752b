"""Closed-form claim measurements (C1-C5, C15, C16, C18, C25): small hand-sized inputs through the
project's own ``algos`` functions (never a re-typed formula). Each ``measure_cNN() -> dict`` returns
plain floats / lists / bools; the expected values are in the table of ``experiments/reproduce_claims.py``, the criteria in
``experiments/claims/criteria.py``."""

from __future__ import annotations

import math

import torch

from algos.advantages import gae, group_advantages, group_mean_std
from algos.losses import aggregate, aggregation_weights, kl_estimate, ppo_clip_loss, sequence_ratios, token_ratios
from algos.metrics import mixed_group_probability

F64 = torch.float64


def _list(x: torch.Tensor) -> list[float]:
    return [float(v) for v in x.detach().reshape(-1)]


def measure_c1() -> dict:
    """Token ratios, their product (sequence ratio), the geometric mean (GSPO) and the token-level
    surrogate with A = 1 (clip 0.25, not active) for old [.5, .25, .5] and new [.6, .2, .6]."""
    old = torch.tensor([[0.5, 0.25, 0.5]], dtype=F64).log()
    new = torch.tensor([[0.6, 0.2, 0.6]], dtype=F64).log()
    mask = torch.ones_like(old, dtype=torch.bool)
    per_token = token_ratios(new, old)[0]
    loss, _ = ppo_clip_loss(per_token, torch.ones(3, dtype=F64), clip_low=0.25, clip_high=0.25)
    return {"token_ratios": _list(per_token), "product": float(sequence_ratios(new, old, mask)[0]),
            "geometric": float(sequence_ratios(new, old, mask, length_normalized=True)[0]),
            "token_objective": float(-loss.mean())}


def measure_c2() -> dict:
    """Group mean, population std and advantages of rewards [0, 0, 1, 1] (one group)."""
    rewards = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64)
    ids = torch.zeros(4, dtype=torch.int64)
    mean, std, _ = group_mean_std(rewards, ids, std="population")
    return {"mean": float(mean[0]), "std": float(std[0]),
            "advantages": _list(group_advantages(rewards, ids, std="population"))}


def _tiny_policy_grads(rewards: list[float]) -> dict:
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
    return {"rewards": rewards, "advantages": _list(adv), "task_grad": float(pg_grad.abs().max()),
            "kl_grad": float(kl_grad.abs().max())}


def measure_c3() -> dict:
    """:func:`_tiny_policy_grads` for the all-0 and the all-1 group."""
    return {"groups": [_tiny_policy_grads(r) for r in ([0.0] * 4, [1.0] * 4)]}


def measure_c4() -> dict:
    """Advantages of [0, 0, 1, 1] with population / sample / no std division (eps 0), and the
    token-mean vs sequence-mean of two responses: 1 token with loss 1, 3 tokens with loss 0."""
    rewards = torch.tensor([0.0, 0.0, 1.0, 1.0], dtype=F64)
    ids = torch.zeros(4, dtype=torch.int64)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    loss = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    return {"population": _list(group_advantages(rewards, ids, std="population", eps=0.0)),
            "sample": _list(group_advantages(rewards, ids, std="sample", eps=0.0)),
            "raw": _list(group_advantages(rewards, ids, std="none")),
            "token_mean": float(aggregate(loss, aggregation_weights(mask, "token-mean"))),
            "seq_mean": float(aggregate(loss, aggregation_weights(mask, "seq-mean-token-mean")))}


C5_BAD_INPUTS = ((1.5, 8), (-0.1, 8), (0.5, True), (0.5, 0), (0.5, 8.0))


def measure_c5() -> dict:
    """``mixed_group_probability`` at G = 8 for p in (0.02, 0.2, 0.98), and which of
    :data:`C5_BAD_INPUTS` raise ``ValueError`` (``rejected``, as ``repr`` pairs)."""
    rejected = []
    for p, g in C5_BAD_INPUTS:
        try:
            mixed_group_probability(p, g)
        except ValueError:
            rejected.append(f"({p!r}, {g!r})")
    return {"G": 8, "p_mix": {p: mixed_group_probability(p, 8) for p in (0.02, 0.2, 0.98)},
            "rejected": rejected, "tried": len(C5_BAD_INPUTS)}


def measure_c15() -> dict:
    """3-step GAE with r = [0, 0, 1], V = [.9, .3, .8], V' = [.3, .8, 0], terminated at the end,
    gamma 1, lambda 0.5 and 1; and the full return minus V."""
    as_row = lambda xs: torch.tensor([xs], dtype=F64)  # noqa: E731
    rewards, values, next_values = as_row([0, 0, 1]), as_row([0.9, 0.3, 0.8]), as_row([0.3, 0.8, 0.0])
    terminated = torch.tensor([[False, False, True]])
    truncated = torch.zeros(1, 3, dtype=torch.bool)
    half, _ = gae(rewards, values, next_values, terminated, truncated, gamma=1.0, lam=0.5)
    one, _ = gae(rewards, values, next_values, terminated, truncated, gamma=1.0, lam=1.0)
    return {"lambda_half": _list(half[0]), "lambda_one": _list(one[0]), "return_minus_value": _list(1.0 - values[0])}


def measure_c16() -> dict:
    """One step r = 0, V = 0.6, V' = 0.8, gamma 0.9, lambda 0.95: GAE target and residual with no
    flag (a compression continues) and with ``terminated``."""
    reward, value, next_value = (torch.tensor([[x]], dtype=F64) for x in (0.0, 0.6, 0.8))
    no = torch.tensor([[False]])
    cont_adv, cont_target = gae(reward, value, next_value, no, no, gamma=0.9, lam=0.95)
    term_adv, term_target = gae(reward, value, next_value, ~no, no, gamma=0.9, lam=0.95)
    return {"continue_target": float(cont_target), "continue_residual": float(cont_adv),
            "terminal_target": float(term_target), "terminal_residual": float(term_adv)}


def measure_c18() -> dict:
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
    return {"task_mean": float(aggregate(loss, w_task)), "token_mean": float(aggregate(loss, w_tok)),
            "splits": [list(s) for s in splits],
            "task_mean_micro": sum(float(aggregate(loss[i], w_task[i])) for i in splits),
            "token_mean_micro": sum(float(aggregate(loss[i], w_tok[i])) for i in splits),
            "local": local, "per_segment": float(aggregate(loss, aggregation_weights(mask, "seq-mean-token-mean")))}


def measure_c25() -> dict:
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
    return {"clipped": [bool(c) for c in clipped], "grad": _list(grad), "ratio": _list(ratio), "loss": _list(loss),
            "ratios_all_one": bool((ratios_now == 1).all()), "kl": float(kl.detach()), "kl_grad_max": float(kl_grad.abs().max())}
