"""How much of the return could ANY critic explain? The explained-variance ceiling of a run's states.

    python -m experiments.value_ceiling RUN_DIR [--rollouts 64] [--points 256] [--branches 8]
                                                [--seed 0] [--out FILE.json]

``critic/explained_variance_heldout`` compares the critic's values with complete Monte Carlo
returns. Part of a return's variance is the future's own randomness (the policy's later samples,
the env's tool faults), which no function of the state can predict, so the metric has a ceiling
below 1. This measures it for the policy and critic of a PPO run's last checkpoint
(``RUN_DIR/checkpoints/last.pt``, its ``config.yaml``):

1. ``--rollouts`` training-like rollouts (train tasks and seeds of ``update_requests`` at an
   update index far past any run's, token seeds from ``--seed``), laid out at the run's decision
   points (``algos.decisions.gae_layout`` at ``algo.value_level``); the points of terminated trajectories
   are the population the metric uses.
2. The critic's EV on all those points (what the run's metric would read at this checkpoint) and on
   ``--points`` points drawn uniformly from them.
3. From each drawn point, ``--branches`` continuations: the engine replays the trajectory's sampled
   tokens up to the point (``RolloutRequest.forced``, same task and env seed, so the env replays
   exactly: checked token by token, a mismatch is an error), re-seeds the env's future tool
   stream (``RolloutRequest.reseed``) on an env that has one (``algos.rollout.has_tool_stream``:
   BugFix; ``env_reseeded`` in the output) and samples the rest. On an env without a tool stream
   (LongHorizon-v1 / -v3) the branches differ in the policy's samples only. A branch's return is
   the sum of its turn rewards from the point's turn on (``gamma`` must be 1); masked or cut-off
   branches are left out.
4. ``EV* = 1 - mean_p Var(G | s_p) / Var(G)`` (``algos.metrics.explained_variance_ceiling``),
   the EV of the branch means (a noisy oracle: ``~ 1 - (1 + 1/K)(1 - EV*)``), and the critic's EV
   on the same points, each with a 95 % bootstrap interval (``--boot`` resamples of the
   trajectories: a trajectory's points are drawn together, since they share its future).
5. The same EV* and critic EV per third of the episode (``thirds``: ``early`` / ``middle`` /
   ``late``): a point at turn ``t`` of a trajectory of ``T`` turns is in third
   ``min(2, 3 t // T)`` (``third_of``); each third's EV* divides by the return variance of its
   own points.

``critic EV / EV*`` is the fraction of the explainable variance the critic explains. Same arguments,
same numbers. Cost: ``points x branches`` extra rollouts (2 048 by default, about a training run's
worth of collection on the demo preset).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf

from algos.critic_points import PointData
from algos.metrics import explained_variance, explained_variance_ceiling
from algos.policy import build_models
from algos.requests import RolloutRequest
from algos.rollout import has_tool_stream
from experiments.runtime.build import policy_shape, rollouts_per_update, train_engine, update_requests
from experiments.runtime.config import validate
from experiments.runtime.schema import TrainConfig, algo_schema, resolve_critic
from experiments.runtime.seeds import Stream, stream_seed

UPDATE_OFFSET = 1_000_000  # update index of the measured rollouts' requests: past any run's own
THIRDS = ("early", "middle", "late")  # the parts of an episode, by third_of


@dataclass(frozen=True)
class Point:
    """One drawn decision point: trajectory ``traj``, segment ``segment``, token index ``col``
    (the point's first token; its value is read at ``col - 1``), the global index ``turn`` of
    the turn holding it (``0 <= turn < turns``, the trajectory's number of turns), its Monte
    Carlo return ``ret`` and the critic's value ``value``."""

    traj: int
    segment: int
    col: int
    turn: int
    turns: int
    ret: float
    value: float


@dataclass(frozen=True)
class PartResult:
    """EV* and the critic's EV on the kept points of one part of the episode."""

    points: int
    critic_ev: float
    critic_ev_ci: tuple[float, float]
    ceiling: float
    ceiling_ci: tuple[float, float]


@dataclass(frozen=True)
class CeilingResult:
    rollouts: int
    success: float  # fraction of the measured rollouts with train reward > 0
    points_all: int  # decision points of terminated trajectories
    critic_ev_all: float
    points: int  # drawn points with >= 2 valid branches
    branches: int
    dropped_branches: int  # masked or cut off (not terminated)
    critic_ev: float
    critic_ev_ci: tuple[float, float]
    oracle_ev: float  # EV of the branch means
    ceiling: float  # EV*
    ceiling_ci: tuple[float, float]
    env_reseeded: bool  # branches re-seeded the env's tool stream (False: they differ in the policy's samples only)
    thirds: dict[str, PartResult]  # THIRDS -> that third's points (third_of)


def load_run(run_dir: Path):
    """``(config, policy, critic)`` of a run directory's last checkpoint (critic None without one)."""
    saved = OmegaConf.load(run_dir / "config.yaml")
    schema = OmegaConf.structured(TrainConfig(algo=algo_schema(str(saved.algo.name))()))
    c = validate(OmegaConf.merge(schema, saved))

    policy, critic = build_models(policy_shape(c, critic=resolve_critic(c)), seed=c.policy.init_seed)
    state = torch.load(run_dir / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)
    policy.load_state_dict(state["policy"])
    if critic is not None:
        critic.load_state_dict(state["critic"])
    policy.eval()
    return c, policy, critic


def turn_of(traj, segment: int, col: int) -> int:
    """Global index (over all segments) of the turn of ``traj`` holding token ``col`` of
    ``segment``."""
    before = sum(len(s.turns) for s in traj.segments[:segment])
    for j, t in enumerate(traj.segments[segment].turns):
        if t.start <= col <= t.end:
            return before + j
    raise ValueError(f"token {col} of segment {segment} is in no turn")


def third_of(turn: int, turns: int) -> int:
    """The third (0 early, 1 middle, 2 late) of turn ``turn`` in a trajectory of ``turns`` turns:
    ``min(2, 3 turn // turns)``, so turns 0..8 of 9 fall 3 / 3 / 3."""
    if not 0 <= turn < turns:
        raise ValueError(f"turn {turn} out of range; allowed: 0..{turns - 1} (a trajectory of {turns} turns)")
    return min(2, 3 * turn // turns)


def forced_prefix(traj, segment: int, col: int) -> tuple[int, ...]:
    """The sampled tokens of ``traj`` before token ``col`` of ``segment``, in order."""
    out: list[int] = []
    for k, seg in enumerate(traj.segments[:segment + 1]):
        end = col if k == segment else len(seg.tokens)
        out += [tok for tok, m in zip(seg.tokens[:end], seg.action_mask[:end]) if m]
    return tuple(out)


def sampled_tokens(traj) -> list[int]:
    return [tok for seg in traj.segments for tok, m in zip(seg.tokens, seg.action_mask) if m]


def turn_rewards(traj) -> list[float]:
    return [t.reward for seg in traj.segments for t in seg.turns]


def measure_points(c, policy, critic, rollouts: int, seed: int) -> tuple[list, list[Point], float]:
    """Step 1-2: ``(trajectories, every terminated point, critic EV on them)``."""
    reqs: list = []
    while len(reqs) < rollouts:  # as many updates' requests as it takes
        reqs += update_requests(c, UPDATE_OFFSET + 1_000 * seed + len(reqs) // max(1, rollouts_per_update(c)))
    reqs = reqs[:rollouts]
    engine = train_engine(c, num_envs=min(c.rollout.num_envs, rollouts))
    trajs = engine.collect(policy, reqs, generator=torch.Generator().manual_seed(stream_seed(seed, stream=Stream.CEILING_ROLLOUTS)))
    engine.close()
    data = PointData(trajs, c.algo.value_level, c.algo.gamma)
    with torch.no_grad():
        values = data.values(critic)
    lay = data.layout
    complete = torch.tensor([t.terminated for t in trajs], dtype=torch.bool)
    held = lay.mask & complete[:, None]
    ev_all = explained_variance(values[held], data.returns[held])
    points = []
    for i, k in held.nonzero().tolist():
        row, col = int(lay.rows[i, k]), int(lay.cols[i, k])
        seg = int(data.batch.row_segment[row])
        points.append(Point(i, seg, col, turn_of(trajs[i], seg, col), len(turn_rewards(trajs[i])),
                            float(data.returns[i, k]), float(values[i, k])))
    return trajs, points, ev_all


def branch(c, policy, trajs, points: list[Point], branches: int, seed: int):
    """Step 3: ``(returns [P, K], valid [P, K], reseeded)`` of ``branches`` continuations of every
    point; ``reseeded``: the env has a tool stream and every branch re-seeded it."""
    engine = train_engine(c, num_envs=min(c.rollout.num_envs, len(points) * branches))
    reseeded = has_tool_stream(engine.envs[0])  # every env of an engine is one env id and kwargs
    reqs, prefixes = [], []
    for p_i, p in enumerate(points):
        t = trajs[p.traj]
        prefix = forced_prefix(t, p.segment, p.col)
        prefixes.append(prefix)
        for k in range(branches):
            reseed = stream_seed(seed, p_i, k, stream=Stream.CEILING_RESEED) if reseeded else None
            reqs.append(RolloutRequest(options=t.options, seed=t.seed, group_id=p_i, forced=prefix, reseed=reseed))
    out = engine.collect(policy, reqs, generator=torch.Generator().manual_seed(stream_seed(seed, stream=Stream.CEILING_BRANCHES)))
    engine.close()
    returns = torch.zeros(len(points), branches, dtype=torch.float64)
    valid = torch.zeros(len(points), branches, dtype=torch.bool)
    for j, b in enumerate(out):
        p_i, k = divmod(j, branches)
        p, prefix = points[p_i], prefixes[p_i]
        original = trajs[p.traj]
        # the replay must reproduce the original context up to the point exactly
        if b.segments[p.segment].tokens[:p.col] != original.segments[p.segment].tokens[:p.col] \
                or sampled_tokens(b)[:len(prefix)] != list(prefix):
            raise RuntimeError(f"branch {k} of point {p_i} did not replay trajectory {p.traj} up to its point")
        returns[p_i, k] = sum(turn_rewards(b)[p.turn:])
        valid[p_i, k] = b.terminated and not b.masked
    return returns, valid, reseeded


def bootstrap(fn, clusters: list[list[int]], resamples: int, seed: int) -> tuple[float, float]:
    """95 % percentile interval of ``fn(idx)`` over ``resamples`` cluster resamples: draw
    ``len(clusters)`` clusters with replacement and take all their indices (points of one
    trajectory share its future, so they are resampled together). NaN resamples are skipped."""
    gen = torch.Generator().manual_seed(seed)
    vals = []
    for _ in range(resamples):
        pick = torch.randint(len(clusters), (len(clusters),), generator=gen).tolist()
        v = fn(torch.tensor([i for c in pick for i in clusters[c]], dtype=torch.long))
        if v == v:
            vals.append(v)
    if not vals:
        return float("nan"), float("nan")
    t = torch.tensor(sorted(vals), dtype=torch.float64)
    return float(torch.quantile(t, 0.025)), float(torch.quantile(t, 0.975))


def clusters_of(owners: list[int], idx: list[int]) -> list[list[int]]:
    """The indices ``idx`` grouped by their trajectory ``owners[i]``, in trajectory order (the
    clusters ``bootstrap`` resamples)."""
    by_traj: dict[int, list[int]] = {}
    for i in idx:
        by_traj.setdefault(owners[i], []).append(i)
    return [by_traj[t] for t in sorted(by_traj)]


def part_result(g, v, b, m, owners: list[int], idx: list[int], resamples: int, seed: int) -> PartResult:
    """Critic EV and EV* on the kept points ``idx`` (returns ``g``, values ``v``, branch returns
    ``b`` / valid ``m``, all indexed by kept point), intervals from ``bootstrap`` at ``seed``
    (critic) and ``seed + 1`` (EV*). NaN everywhere for no point."""
    if not idx:
        nan = float("nan")
        return PartResult(0, nan, (nan, nan), nan, (nan, nan))
    i = torch.tensor(idx, dtype=torch.long)
    clusters = clusters_of(owners, idx)
    return PartResult(
        points=len(idx), critic_ev=explained_variance(v[i], g[i]),
        critic_ev_ci=bootstrap(lambda j: explained_variance(v[j], g[j]), clusters, resamples, seed),
        ceiling=explained_variance_ceiling(g[i], b[i], m[i]),
        ceiling_ci=bootstrap(lambda j: explained_variance_ceiling(g[j], b[j], m[j]), clusters, resamples, seed + 1))


def ceiling(c, policy, critic, rollouts: int, n_points: int, branches: int, seed: int, resamples: int) -> CeilingResult:
    trajs, pool, ev_all = measure_points(c, policy, critic, rollouts, seed)
    if len(pool) < 2:
        raise ValueError(f"only {len(pool)} decision points in terminated trajectories; raise --rollouts")
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randperm(len(pool), generator=gen)[:n_points].sort().values.tolist()
    points = [pool[i] for i in pick]
    returns, valid, reseeded = branch(c, policy, trajs, points, branches, seed)
    keep = valid.sum(1) >= 2
    kept = [p for p, k in zip(points, keep.tolist()) if k]
    g = torch.tensor([p.ret for p in kept], dtype=torch.float64)
    v = torch.tensor([p.value for p in kept], dtype=torch.float64)
    b, m = returns[keep], valid[keep]
    means = (b * m).sum(1) / m.sum(1)
    owners = [p.traj for p in kept]
    whole = part_result(g, v, b, m, owners, list(range(len(kept))), resamples, seed + 1)
    thirds = {name: part_result(g, v, b, m, owners, [i for i, p in enumerate(kept) if third_of(p.turn, p.turns) == j],
                                resamples, seed + 10 + 2 * j)
              for j, name in enumerate(THIRDS)}
    return CeilingResult(
        rollouts=rollouts, success=sum(t.train_reward > 0 for t in trajs) / len(trajs),
        points_all=len(pool), critic_ev_all=ev_all, points=whole.points, branches=branches,
        dropped_branches=int((~valid).sum()), critic_ev=whole.critic_ev, critic_ev_ci=whole.critic_ev_ci,
        oracle_ev=explained_variance(means, g), ceiling=whole.ceiling, ceiling_ci=whole.ceiling_ci,
        env_reseeded=reseeded, thirds=thirds)


def format_result(r: CeilingResult, run_dir: Path) -> str:
    frac = r.critic_ev / r.ceiling if r.ceiling > 0 else float("nan")
    future = ("the env's tool stream re-seeded in every branch" if r.env_reseeded
              else "branches differ in the policy's samples only (the env has no tool stream)")
    lines = [
        f"value ceiling of {run_dir}: {r.rollouts} rollouts (success {r.success:.3f}), {r.points_all} decision points "
        f"of terminated trajectories, critic EV on all of them {r.critic_ev_all:.3f}",
        f"{r.points} drawn points x {r.branches} branches ({r.dropped_branches} branches masked or cut off, left out); "
        f"{future}",
        f"  critic EV                 {r.critic_ev:6.3f}  [{r.critic_ev_ci[0]:.3f}, {r.critic_ev_ci[1]:.3f}]",
        f"  EV* (true value, ceiling) {r.ceiling:6.3f}  [{r.ceiling_ci[0]:.3f}, {r.ceiling_ci[1]:.3f}]",
        f"  EV of the branch means    {r.oracle_ev:6.3f}  (noisy oracle, ~ 1 - (1 + 1/K)(1 - EV*))",
        f"  critic EV / EV*           {frac:6.3f}",
        "  per third of the episode (by turn):",
    ]
    for name, t in r.thirds.items():
        lines.append(f"    {name:<6} {t.points:4d} points  EV* {t.ceiling:6.3f} [{t.ceiling_ci[0]:.3f}, {t.ceiling_ci[1]:.3f}]"
                     f"  critic EV {t.critic_ev:6.3f} [{t.critic_ev_ci[0]:.3f}, {t.critic_ev_ci[1]:.3f}]")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.value_ceiling", description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path, help="a PPO run directory (config.yaml, checkpoints/last.pt)")
    parser.add_argument("--rollouts", type=int, default=64, help="rollouts whose decision points are measured")
    parser.add_argument("--points", type=int, default=256, help="points drawn for branching")
    parser.add_argument("--branches", type=int, default=8, help="continuations per drawn point (>= 2)")
    parser.add_argument("--boot", type=int, default=1000, help="bootstrap resamples for the intervals")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON here")
    args = parser.parse_args(argv)
    for name, low in (("rollouts", 1), ("points", 2), ("branches", 2), ("boot", 1)):
        if getattr(args, name) < low:
            parser.error(f"--{name}={getattr(args, name)} invalid; allowed: an int >= {low}")
    for name in ("config.yaml", "checkpoints/last.pt"):
        if not (args.run_dir / name).exists():
            parser.error(f"run_dir={args.run_dir} has no {name}; allowed: a run directory of experiments.train")
    c, policy, critic = load_run(args.run_dir)
    if critic is None and policy.value_head is None:
        parser.error(f"run_dir={args.run_dir} is a {c.algo.name} run without a critic; allowed: a run with one (algo=ppo)")
    if c.algo.gamma != 1.0:
        parser.error(f"algo.gamma={c.algo.gamma} in {args.run_dir}; allowed: 1.0 (a branch's return is its undiscounted sum)")
    torch.set_num_threads(max(1, c.threads))
    r = ceiling(c, policy, critic if critic is not None else policy, args.rollouts, args.points, args.branches,
                args.seed, args.boot)
    print(format_result(r, args.run_dir))
    if args.out is not None:
        args.out.write_text(json.dumps(asdict(r), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
