"""Critic-based PPO with a token-level loss (the document's GLM-5.2 note) and GAE across segments.

Decision points: every sampled token (``value_level=token``) or the first sampled token of each
tool call (``value_level=turn``: one value per turn, its advantage broadcast to the turn's tokens).
The value of a decision point at token index ``c`` is read at ``c - 1`` (the position that precedes
it; for the first token of an action that is the ``[SEP]`` closing the observation).

Each trajectory's decision points, over ALL its segments, are laid out in one row and fed to
``algos.advantages.gae`` with:
  rewards      each turn's reward on its last sampled token (turn level: on the turn's point)
  next_values  the value of the next decision point in the row. Inside a segment that is the next
               token's state; at a compression boundary it is the value of the compressed context
               the episode actually continued from (the ``[SEP]`` ending ``[BOS] summary [SEP]`` of
               the next segment), with neither flag set: the recursion continues (C16/C17)
  terminated   on the trajectory's last point when the task ended: no bootstrap
  truncated    on the last point when an outside limit cut it: bootstrap from V(next state) read at
               the ``[SEP]`` after the final observation; the recursion stops
``algo.compression_as_terminal=true`` deliberately mislabels each compression as terminal (no
bootstrap, recursion stops) to demonstrate claim C17's failure mode.

Value loss: clipped (``algo.value_clip``) squared error against the GAE returns at the points,
aggregated like the policy loss. ``algo.value_warmup_updates``: the first updates train only the
critic (the policy loss is off and a value head does not move the shared trunk).

Diagnostics (C20): ``critic/explained_variance_heldout`` is the explained variance of the critic's predictions on
this batch BEFORE it is fitted on it, against the complete Monte Carlo returns of terminated
trajectories (rollouts not used in fitting); ``critic/explained_variance_in_batch`` compares the fitted values
with the GAE returns they were trained on.
"""

from __future__ import annotations

import torch

from algos.advantages import discounted_returns, gae
from algos.batch import Batch, action_layout
from algos.losses import aggregation_weights, aggregate, value_loss
from algos.metrics import explained_variance
from algos.policy import shift_values
from algos.trainer import Trainer, UpdateContext, register

VALUE_LEVELS = ("token", "turn")


def gae_layout(batch: Batch, raw_values: torch.Tensor, level: str = "token",
               compression_as_terminal: bool = False) -> dict:
    """The ``[N, L]`` inputs of ``gae`` (one row per trajectory, its decision points in order).

    ``raw_values [R, T]`` is the critic output at each position (value of the prefix ending
    there). Returns a dict with ``rows, cols, mask, rewards, values, next_values, terminated,
    truncated``."""
    rows, cols, mask = action_layout(batch, level)
    n, length = mask.shape
    values = raw_values[rows, (cols - 1).clamp(min=0)] * mask
    # rewards at the decision points
    if level == "token":
        rewards = batch.rewards[rows, cols] * mask
    else:
        n_turns = max(int(mask.sum(1).max()), 1)
        turn_rewards = torch.zeros(n, n_turns)
        act = batch.turn_index >= 0
        r_idx, t_idx = torch.nonzero(act, as_tuple=True)
        traj = batch.row_traj[r_idx]
        turn = batch.turn_index[r_idx, t_idx]
        turn_rewards.index_put_((traj, turn), batch.rewards[r_idx, t_idx], accumulate=True)
        rewards = torch.zeros(n, length)
        rewards[:, :n_turns] = turn_rewards[:, :length]
        rewards = rewards * mask
    next_values = torch.zeros(n, length)
    next_values[:, :-1] = values[:, 1:]
    terminated = torch.zeros(n, length, dtype=torch.bool)
    truncated = torch.zeros(n, length, dtype=torch.bool)
    counts = mask.sum(1)
    last_row_of: dict[int, int] = {}
    for row in range(batch.num_rows):
        last_row_of[int(batch.row_traj[row])] = row
    for i, traj in enumerate(batch.trajectories):
        k = int(counts[i]) - 1
        if k < 0:
            continue
        last_row = last_row_of[i]
        if traj.terminated:
            terminated[i, k] = True
            next_values[i, k] = 0.0
        else:
            truncated[i, k] = True
            b = int(batch.bootstrap_index[last_row])
            next_values[i, k] = raw_values[last_row, b] if b >= 0 else 0.0
        if compression_as_terminal:
            # the last point of every segment that ended in a compression
            seg_rows = rows[i, : k + 1]
            boundary = torch.nonzero(seg_rows[1:] != seg_rows[:-1], as_tuple=True)[0]
            for j in boundary.tolist():
                terminated[i, j] = True
                next_values[i, j] = 0.0
    return {"rows": rows, "cols": cols, "mask": mask, "rewards": rewards, "values": values,
            "next_values": next_values, "terminated": terminated, "truncated": truncated}


def scatter_to_tokens(flat: torch.Tensor, layout: dict, batch: Batch, broadcast_turns: bool = False) -> torch.Tensor:
    """``[N, L]`` per decision point -> ``[R, T]`` at the points' token positions, or with
    ``broadcast_turns`` (turn-level layout) on every sampled token of each turn."""
    out = torch.zeros(batch.tokens.shape, dtype=flat.dtype)
    if not broadcast_turns:
        m = layout["mask"]
        out[layout["rows"][m], layout["cols"][m]] = flat[m]
        return out
    act = batch.turn_index >= 0
    r_idx, t_idx = torch.nonzero(act, as_tuple=True)
    out[r_idx, t_idx] = flat[batch.row_traj[r_idx], batch.turn_index[r_idx, t_idx]]
    return out


def point_mask(layout: dict, batch: Batch) -> torch.Tensor:
    """``[R, T]`` float: 1 at the decision points (where the value loss applies)."""
    out = torch.zeros(batch.tokens.shape)
    m = layout["mask"]
    out[layout["rows"][m], layout["cols"][m]] = 1.0
    return out


@register("ppo")
class PPOTrainer(Trainer):
    def __init__(self, algo, policy, critic=None, reference=None, temperature=1.0, meter=None) -> None:
        super().__init__(algo, policy, critic, reference, temperature, meter)
        if critic is None and policy.value_head is None:
            raise ValueError("algo=ppo needs a critic: set policy.critic=head or policy.critic=separate")
        if algo.value_level not in VALUE_LEVELS:
            raise ValueError(f"algo.value_level={algo.value_level!r} unknown; allowed: {', '.join(VALUE_LEVELS)}")

    def policy_loss_coef(self) -> float:
        return 0.0 if self.updates_done < self.algo.value_warmup_updates else 1.0

    def advantages(self, batch: Batch, ctx: UpdateContext) -> torch.Tensor:
        algo = self.algo
        raw = ctx.extras["old_values_raw"]
        layout = gae_layout(batch, raw, algo.value_level, getattr(algo, "compression_as_terminal", False))
        adv, ret = gae(layout["rewards"], layout["values"], layout["next_values"], layout["terminated"],
                       layout["truncated"], gamma=algo.gamma, lam=algo.lam, mask=layout["mask"])
        ctx.extras["layout"] = layout
        ctx.extras["returns_flat"] = ret
        ctx.extras["adv_flat"] = adv
        # value targets aligned to the token index of their decision point
        ctx.extras["returns"] = scatter_to_tokens(ret, layout, batch)
        vmask = point_mask(layout, batch)
        ctx.extras["value_mask"] = vmask
        ctx.extras["old_values"] = shift_values(raw)
        tok_adv = scatter_to_tokens(adv, layout, batch, broadcast_turns=algo.value_level == "turn")
        m = ctx.loss_mask > 0
        if algo.norm_adv and m.any():
            sel = tok_adv[m]
            tok_adv = torch.where(m, (tok_adv - sel.mean()) / (sel.std(unbiased=False) + 1e-8), torch.zeros_like(tok_adv))
        return tok_adv * m

    def weights(self, mb, batch: Batch, ctx: UpdateContext) -> dict:
        w = super().weights(mb, batch, ctx)
        w["value"] = aggregation_weights(ctx.extras["value_mask"][mb], self.algo.loss_agg, traj_ids=batch.row_traj[mb])
        return w

    def extra_loss(self, rows, batch: Batch, ctx: UpdateContext, out: dict, weights: dict, stats: dict):
        algo = self.algo
        values = shift_values(out["values"])
        vmask = ctx.extras["value_mask"][rows]
        w = weights["value"]
        target = ctx.extras["returns"][rows]
        old_v = ctx.extras["old_values"][rows]
        vl = value_loss(values, old_v, target, algo.value_clip)
        vl = torch.where(vmask > 0, vl, torch.zeros_like(vl))
        loss_v = aggregate(vl, w)
        stats.setdefault("value_loss", []).append(loss_v.item())
        if vmask.any():
            stats.setdefault("_ev_pred", []).append(values.detach()[vmask > 0])
            stats.setdefault("_ev_target", []).append(target[vmask > 0])
        return algo.vf_coef * loss_v

    def finish(self, batch: Batch, ctx: UpdateContext, stats: dict) -> dict:
        algo = self.algo
        layout = ctx.extras["layout"]
        m = layout["mask"]
        out = {"critic/value_mean": float(layout["values"][m].mean()) if m.any() else 0.0,
               "critic/return_mean": float(ctx.extras["returns_flat"][m].mean()) if m.any() else 0.0,
               "train/adv_abs_mean": float(ctx.extras["adv_flat"][m].abs().mean()) if m.any() else 0.0,
               "train/policy_frozen": float(self.updates_done <= algo.value_warmup_updates)}
        # in-batch: fitted values vs the GAE returns they were trained on (last epoch's forwards)
        preds, targets = stats.pop("_ev_pred", []), stats.pop("_ev_target", [])
        n_last = len(preds) // max(algo.epochs, 1)
        if preds:
            p, t = torch.cat(preds[-n_last:]), torch.cat(targets[-n_last:])
            out["critic/explained_variance_in_batch"] = explained_variance(p, t)
        # held-out: values before fitting on this batch vs complete Monte Carlo returns
        complete = torch.tensor([tr.terminated for tr in batch.trajectories], dtype=torch.bool)
        mc = discounted_returns(layout["rewards"], layout["terminated"], layout["truncated"],
                                gamma=algo.gamma, mask=m)
        held = m & complete[:, None]
        if held.sum() >= 2:
            out["critic/explained_variance_heldout"] = explained_variance(layout["values"][held], mc[held])
        out["critic/heldout_points"] = int(held.sum())
        return out


__all__ = ["PPOTrainer", "VALUE_LEVELS", "gae_layout", "point_mask", "scatter_to_tokens"]
