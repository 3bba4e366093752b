"""How much of the return can a critic predict from the prefix at all?

    python -m experiments.critic_probe                                   # learn_bugfix start model
    python -m experiments.critic_probe --rollouts 2048 --steps 800 -- experiment=learn_bugfix

Fixed data, long fit, held-out score: the start model (``policy.init_checkpoint``, the cached warm
start by default) samples two disjoint sets of ``--rollouts`` complete training rollouts (train
tasks ``(seed_k * 7919 + i) mod env.train_tasks``, token-sampling seeds 11 and 12, the training
engine at ``rollout.temperature``). A fresh critic of the run's kind (``policy.critic``: a
separate critic starts from the start model's trunk, as in ``experiments.runtime.build.build_policy``;
``head`` fits the value head and trunk of a copy of the start policy) is fit on set A only by
AdamW on the squared error to the Monte Carlo returns

    G_k = sum_{j >= k} gamma^(j - k) r_j        (over the trajectory's decision points; no bootstrap)

at the decision points of ``algo.value_level`` (``algos.decisions.gae_layout``; the value of a point is
read at the position before its first token, as PPO reads it), ``--batch`` trajectories per step,
gradient norm clipped at 1. Every ``--every`` steps it prints the loss and the explained variance
``1 - Var(G - V) / Var(G)`` (``algos.metrics.explained_variance``) on A (the fit) and on B (held
out). The best held-out EV over the fit is what the prefix predicts for this critic and data: if it
is far below a target, no critic tuning reaches that target on these rollouts.

Hydra overrides after ``--`` (default ``experiment=learn_bugfix algo=ppo``) choose the task set,
start model, critic and ``algo.gamma`` / ``algo.value_level``. Same arguments, same numbers.
"""

from __future__ import annotations

import argparse
import copy
import sys
from dataclasses import dataclass

import torch

from algos.critic_points import PointData
from algos.requests import make_requests
from experiments.runtime.build import build_policy, train_engine
from experiments.runtime.config import compose_config, validate
from experiments.runtime.schema import ConfigError, resolve_critic
from experiments.runtime.seeds import PROBE_TASKS
from experiments.runtime.warmstart import start_model

DEFAULT_OVERRIDES = ("experiment=learn_bugfix", "algo=ppo")
SAMPLE_SEEDS = (11, 12)  # set A (fit), set B (held out)


@dataclass(frozen=True)
class ProbeRow:
    step: int
    loss: float  # the last step's minibatch loss (NaN at step 0)
    fit_ev: float  # EV on set A, all its decision points
    heldout_ev: float  # EV on set B


def build_critic(c):
    """The probe's critic and the start policy that samples: ``(critic, policy)``."""
    start = start_model(c)
    policy, critic, _ = build_policy(c, start.path)
    if critic is None:
        if resolve_critic(c) != "head":
            raise ValueError(f"policy.critic={resolve_critic(c)!r}: the probe needs a critic (head or separate)")

        critic = copy.deepcopy(policy)  # fit the head (and trunk) of a copy; the sampler stays the start model
    return critic, policy


def sample(c, policy, n: int, seed: int) -> list:
    """``n`` training rollouts of the start ``policy`` (one per task), token-sampling seed ``seed``."""
    engine = train_engine(c, num_envs=min(c.rollout.num_envs, n))
    reqs = make_requests(n, 1, seed=seed, task_indices=[PROBE_TASKS(seed, i) % c.env.train_tasks for i in range(n)])
    trajs = engine.collect(policy, reqs, policy_version=0, generator=torch.Generator().manual_seed(seed))
    engine.close()
    return trajs


def probe(c, rollouts: int, steps: int, lr: float, batch: int, every: int, seed: int = 0) -> tuple[list[ProbeRow], dict]:
    """Fit the critic on set A, score on set B (module docstring). Returns the rows (step 0 and
    every ``every`` steps) and ``{"success_a", "success_b", "points_a", "points_b"}``."""
    torch.manual_seed(seed)
    critic, policy = build_critic(c)
    a = PointData(sample(c, policy, rollouts, SAMPLE_SEEDS[0]), c.algo.value_level, c.algo.gamma)
    b = PointData(sample(c, policy, rollouts, SAMPLE_SEEDS[1]), c.algo.value_level, c.algo.gamma)
    info = {"success_a": sum(t.train_reward > 0 for t in a.trajectories) / rollouts,
            "success_b": sum(t.train_reward > 0 for t in b.trajectories) / rollouts,
            "points_a": int(a.layout.mask.sum()), "points_b": int(b.layout.mask.sum())}
    opt = torch.optim.AdamW(critic.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    rows = [ProbeRow(0, float("nan"), a.ev(critic), b.ev(critic))]
    critic.train()
    for step in range(1, steps + 1):
        pick = torch.randperm(rollouts, generator=gen)[:batch].tolist()
        mb = PointData([a.trajectories[i] for i in pick], c.algo.value_level, c.algo.gamma)
        m = mb.layout.mask
        loss = ((mb.values(critic) - mb.returns)[m] ** 2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(critic.parameters(), 1.0)
        opt.step()
        if step % every == 0 or step == steps:
            critic.eval()
            rows.append(ProbeRow(step, loss.item(), a.ev(critic), b.ev(critic)))
            critic.train()
    return rows, info


def format_rows(rows: list[ProbeRow]) -> str:
    lines = ["step     loss    fit EV  held-out EV"]
    lines += [f"{r.step:5d}  {r.loss:7.4f}  {r.fit_ev:8.3f}  {r.heldout_ev:11.3f}" for r in rows]
    best = max(rows, key=lambda r: r.heldout_ev if r.heldout_ev == r.heldout_ev else -1e9)
    lines.append(f"best held-out EV {best.heldout_ev:.3f} at step {best.step}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.critic_probe", description=__doc__.split("\n")[0])
    parser.add_argument("--rollouts", type=int, default=512, help="rollouts per set (A: fit, B: held out)")
    parser.add_argument("--steps", type=int, default=400, help="optimizer steps on set A")
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--batch", type=int, default=64, help="trajectories per step")
    parser.add_argument("--every", type=int, default=50, help="print every N steps")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides (after --); default: " + " ".join(DEFAULT_OVERRIDES))
    args = parser.parse_args(argv)
    for name in ("rollouts", "steps", "batch", "every"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)} invalid; allowed: an int >= 1")
    if args.lr <= 0:
        parser.error(f"--lr={args.lr} invalid; allowed: a number > 0")

    overrides = list(args.overrides) or list(DEFAULT_OVERRIDES)
    try:
        c = validate(compose_config(overrides + ["run_dir=unused"]))
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    torch.set_num_threads(max(1, c.threads))
    rows, info = probe(c, args.rollouts, args.steps, args.lr,
                       min(args.batch, args.rollouts), args.every)
    print(f"critic probe: {' '.join(overrides)}; {args.rollouts} rollouts per set, train-reward success "
          f"A {info['success_a']:.3f} B {info['success_b']:.3f}; decision points A {info['points_a']} B {info['points_b']}; "
          f"value level {c.algo.value_level}, gamma {c.algo.gamma}")
    print(format_rows(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
