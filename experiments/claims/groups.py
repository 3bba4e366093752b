"""Group claims: mixed-group rate vs P_mix (C6), comparison without aligned steps (C12), segments
stay one group member (C13), one advantage per trajectory (C14). Each ``measure_cNN`` returns its
claim's frozen result: the measured values as fields, the row's texts and the pass rule."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import torch

import envs
from algos.advantages import group_mean_std
from algos.batch import Batch, Trajectory
from algos.metrics import binomial_confidence_interval, group_outcome_rates, mixed_group_probability
from algos.requests import RolloutRequest, make_requests
from algos.trainer import make_trainer
from envs.long_horizon_v3 import FIX_NAMES
from envs.long_horizon_v3_agents import OracleAgent
from experiments.claims.common import (
    BUGFIX,
    ScriptAgent,
    algo_config,
    collect,
    make_engine,
    outcome_advantages,
    rollout_batch,
    run_update,
    scripted_trajectory,
    start_model_info,
    start_policy,
)
from experiments.claims.result import EMPIRICAL, ClaimResult


# --------------------------------------------------------------------------------------------- C6
@dataclass(frozen=True)
class GroupRates:
    """Outcome statistics over the groups whose members are all live: ``groups``,
    ``mixed_groups``, ``mixed_rate``, ``successes`` and ``trials`` (members with reward > 0 / all
    members), ``p_hat`` = successes / trials and ``p_mix`` = ``mixed_group_probability(p_hat, G)``."""

    groups: int
    mixed_groups: int
    mixed_rate: float
    successes: int
    trials: int
    p_hat: float
    p_mix: float


def group_rates(trajs: list[Trajectory], group_size: int) -> GroupRates:
    """:class:`GroupRates` over the groups whose ``group_size`` members are all live (a masked
    episode is an infrastructure failure, not an outcome); the mixed rate comes from
    ``algos.metrics.group_outcome_rates`` on the training reward."""
    by_group: dict[int, list[Trajectory]] = {}
    for t in trajs:
        by_group.setdefault(t.group_id, []).append(t)
    full = {g for g, ms in by_group.items() if len(ms) == group_size and not any(m.masked for m in ms)}
    live = [t for t in trajs if t.group_id in full]
    rewards = torch.tensor([t.train_reward for t in live], dtype=torch.float64)
    groups = torch.tensor([t.group_id for t in live], dtype=torch.long)
    rates = group_outcome_rates(rewards, groups)
    n = int(rates["n_groups"])
    successes = int(sum(t.train_reward > 0 for t in live))
    p_hat = successes / max(len(live), 1)
    return GroupRates(groups=n, mixed_groups=round(rates["mixed"] * n), mixed_rate=float(rates["mixed"]),
                      successes=successes, trials=len(live), p_hat=p_hat,
                      p_mix=mixed_group_probability(p_hat, group_size))


@dataclass(frozen=True)
class C6Result(ClaimResult):
    """Mixed-group rates of real GRPO groups in three settings: ``independent`` (with the 95 %
    Wilson interval ``ci_low, ci_high`` of its mixed rate), ``shared_seed`` (with the number of
    ``identical_groups``) and ``mixed_tasks`` (with the success rate of each half)."""

    what: ClassVar[str] = ("measured mixed-group rate vs P_mix (real rollout engine, GRPO groups; shared-seed and "
                           "mixed-task groups)")
    expected: ClassVar[str] = "within binomial CI; lower when correlated"
    kind: ClassVar[str] = EMPIRICAL

    group_size: int
    task_index: int
    hard_task_index: int
    independent: GroupRates
    ci_low: float
    ci_high: float
    shared_seed: GroupRates
    identical_groups: int
    mixed_tasks: GroupRates
    p_train: float
    p_heldout: float

    def passes(self) -> bool:
        """``P_mix`` lies inside the interval of the independent groups' mixed rate; the
        correlated settings mix less than the independent groups and than their own ``P_mix``."""
        i, s, x = self.independent, self.shared_seed, self.mixed_tasks
        return (self.ci_low <= i.p_mix <= self.ci_high and s.mixed_rate < i.mixed_rate
                and x.mixed_rate < i.mixed_rate and s.mixed_rate < s.p_mix and x.mixed_rate < x.p_mix)

    @property
    def measured(self) -> str:
        i, s, x, g = self.independent, self.shared_seed, self.mixed_tasks, self.group_size
        inside = "inside" if self.ci_low <= i.p_mix <= self.ci_high else "OUTSIDE"
        return (f"warm-start policy, real rollout engine, easy BugFix train task {self.task_index}, G={g}, outcome "
                f"reward: independent ({i.groups} groups, {i.trials} tries): p_hat {i.p_hat:.3f}, measured "
                f"mixed rate {i.mixed_rate:.3f} (95% Wilson CI [{self.ci_low:.3f}, {self.ci_high:.3f}]) vs "
                f"P_mix(p_hat, G={g}) {i.p_mix:.3f}: {inside}; shared seed + sampling stream ({s.groups} groups, "
                f"{self.identical_groups} with all {g} members identical): p_hat {s.p_hat:.3f}, mixed "
                f"{s.mixed_rate:.3f} vs P_mix {s.p_mix:.3f}; mixed tasks (train task p {self.p_train:.3f} / "
                f"held-out task {self.hard_task_index} p {self.p_heldout:.3f}, {x.groups} groups): pooled p_hat "
                f"{x.p_hat:.3f}, mixed {x.mixed_rate:.3f} vs P_mix {x.p_mix:.3f}")


def measure_c6(group_size: int = 8, n_groups: int = 120, task_index: int = 0, hard_task_index: int = 0,
               seed: int = 6) -> C6Result:
    """Mixed-group rate of real GRPO groups in three settings, ``n_groups`` groups of ``group_size``
    (measured once per argument set in a process, like the claims' trainer runs: the table and
    its tests read the same numbers).

    Warm-start policy, real rollout engine, easy BugFix (tool faults on), outcome reward:
      ``independent``  every group is train task ``task_index``, members with their own env seeds
                       and sampling draws (``make_requests``): i.i.d. tries with one p; also the
                       95 % Wilson interval ``ci_low, ci_high`` of its mixed rate over groups;
      ``shared_seed``  the same task, all members of a group share one env seed and one sampling
                       stream (member g of every group comes from collect g, each collect reseeded
                       identically); ``identical_groups``: groups whose members' tokens all agree;
      ``mixed_tasks``  half the groups on the train task, half on held-out task ``hard_task_index``
                       (an unseen template, lower p); ``p_train`` / ``p_heldout`` per half.
    Each setting holds :func:`group_rates`'s numbers.
    """
    return _measure_c6(group_size, n_groups, task_index, hard_task_index, seed)


@lru_cache(maxsize=2)
def _measure_c6(group_size: int, n_groups: int, task_index: int, hard_task_index: int, seed: int) -> C6Result:
    start_model_info()
    torch.set_num_threads(1)
    policy = start_policy()
    engine = make_engine()
    train = {"task_index": task_index, "split": "train"}
    held = {"task_index": hard_task_index, "split": "heldout"}
    reqs = make_requests(n_groups, group_size, seed=seed, task_indices=[task_index] * n_groups)
    independent = group_rates(collect(engine, policy, reqs, seed), group_size)
    lo, hi = binomial_confidence_interval(independent.mixed_groups, independent.groups)
    base = make_requests(n_groups, 1, seed=seed + 1, task_indices=[task_index] * n_groups)
    shared: list[Trajectory] = []
    for _ in range(group_size):
        shared.extend(collect(engine, policy, [RolloutRequest(r.options, r.seed, r.group_id) for r in base], seed + 1))
    distinct: dict[int, set] = {}
    for t in shared:
        distinct.setdefault(t.group_id, set()).add(tuple(tok for s in t.segments for tok in s.tokens))
    half = n_groups // 2
    mreqs = [RolloutRequest(train if r.group_id < half else held, r.seed, r.group_id)
             for r in make_requests(n_groups, group_size, seed=seed + 2, task_indices=[task_index] * n_groups)]
    mix = collect(engine, policy, mreqs, seed + 2)
    engine.close()
    easy = [t.train_reward > 0 for t in mix if t.group_id < half]
    hard = [t.train_reward > 0 for t in mix if t.group_id >= half]
    return C6Result(group_size=group_size, task_index=task_index, hard_task_index=hard_task_index,
                    independent=independent, ci_low=float(lo), ci_high=float(hi),
                    shared_seed=group_rates(shared, group_size),
                    identical_groups=sum(len(v) == 1 for v in distinct.values()),
                    mixed_tasks=group_rates(mix, group_size), p_train=sum(easy) / max(len(easy), 1),
                    p_heldout=sum(hard) / max(len(hard), 1))


# -------------------------------------------------------------------------------------------- C12
def trajectory_values(batch: Batch, token_advantages: torch.Tensor) -> list[torch.Tensor]:
    """The advantages on each trajectory's action tokens (all its rows, in row order), one 1-D
    tensor per trajectory of ``batch``."""
    act = batch.action_mask > 0
    return [token_advantages[(batch.row_traj == i)[:, None] & act] for i in range(len(batch.trajectories))]


@dataclass(frozen=True)
class GroupMember:
    """One scripted episode of C12's group: turns, stop reason, reward, verified score and the
    number of its action tokens in the update."""

    turns: int
    stop_reason: str
    reward: float
    verified: int | None
    action_tokens: int


@dataclass(frozen=True)
class C12Result(ClaimResult):
    """A 4-turn success (``win``) and a 10-turn failure (``lose``) in one GRPO group: the group's
    mean and std, each trajectory's advantage, whether every action token carries it
    (``broadcast``) and every other token 0 (``env_tokens_zero``)."""

    what: ClassVar[str] = "group comparison without aligned steps (real BugFix episodes, GRPO update)"
    expected: ClassVar[str] = "4-step success vs 10-step failure compared by outcome: A +1 / -1 on every action token"
    kind: ClassVar[str] = EMPIRICAL

    task_index: int
    win: GroupMember
    lose: GroupMember
    mean: float
    std: float
    trajectory_advantages: tuple[float, ...]
    broadcast: bool
    env_tokens_zero: bool

    def passes(self) -> bool:
        """4 vs 10 turns, verified 1 vs 0, mean and std 0.5, advantages +1 / -1 on every action
        token and 0 elsewhere."""
        w, lo = self.win, self.lose
        return (w.turns == 4 and lo.turns == 10 and w.verified == 1 and lo.verified == 0
                and self.mean == 0.5 and self.std == 0.5 and self.trajectory_advantages == (1.0, -1.0)
                and self.broadcast and self.env_tokens_zero)

    @property
    def measured(self) -> str:
        w, lo, a = self.win, self.lose, self.trajectory_advantages
        return (f"easy BugFix train task {self.task_index}: run_tests + fix + run_tests + submit {w.turns} turns "
                f"({w.stop_reason}, reward {w.reward:g}, {w.action_tokens} action tokens) vs ls x9 + submit "
                f"{lo.turns} turns ({lo.stop_reason}, reward {lo.reward:g}, {lo.action_tokens} action tokens); "
                f"GRPO (population std, eps 0): mean {self.mean:.4g}, std {self.std:.4g}, advantages "
                f"[{a[0]:+.4g}, {a[1]:+.4g}], on every action token: {self.broadcast}")


def measure_c12(task_index: int = 0) -> C12Result:
    """A 4-turn success and a 10-turn failure in one GRPO group (population std, eps 0).

    Real easy-BugFix episodes (faults off, train task ``task_index``, seeds 0 and 1) laid out by
    ``demo_to_trajectory``: a scripted agent that knows the fix (run tests, fix, run tests, submit)
    and one that lists files 9 times and submits. Both go through the real GRPO update; the
    trajectory advantages are read on each trajectory's first action token, the group ``mean`` /
    ``std`` come from ``group_mean_std``."""
    start_model_info()
    # a turn limit above the failing member's 10 turns (BugFix-v2 easy stops at 6)
    env = envs.make(BUGFIX, difficulty="easy", faults=False, max_turns=12)
    options = {"task_index": task_index, "split": "train"}
    env.reset(seed=0, options=options)
    fixes = list(env.unwrapped.oracle_actions())  # the task's fix (a function of the task, not the seed)
    win = scripted_trajectory(env, ScriptAgent(["run_tests", *fixes, "run_tests", "submit"]), 0, options)
    lose = scripted_trajectory(env, ScriptAgent(["ls"] * 9 + ["submit"]), 1, options)
    env.close()
    trainer = make_trainer("grpo", algo_config("grpo", std="population", adv_eps=0.0, group_size=2,
                                               tasks_per_update=1), start_policy())
    record = run_update(trainer, [win, lose])
    batch, adv = record.batch, record.advantages.tokens
    act = batch.action_mask > 0
    rewards = torch.tensor([win.train_reward, lose.train_reward], dtype=torch.float64)
    mean, sd, _ = group_mean_std(rewards, torch.zeros(2, dtype=torch.long), std="population")
    tok = trajectory_values(batch, adv)
    traj_adv = tuple(float(t[0]) for t in tok)
    win_member, lose_member = (GroupMember(turns=t.turns, stop_reason=str(t.stop_reason), reward=float(t.train_reward),
                                           verified=t.verified, action_tokens=int(tok[i].numel()))
                               for i, t in enumerate((win, lose)))
    return C12Result(task_index=task_index, win=win_member, lose=lose_member, mean=float(mean[0]), std=float(sd[0]),
                     trajectory_advantages=traj_adv,
                     broadcast=all(bool((t == a).all()) for t, a in zip(tok, traj_adv)),
                     env_tokens_zero=bool((adv[~act] == 0).all()))


# -------------------------------------------------------------------------------------------- C13
C13_ENV = {"n_stages": 4, "max_turns": 20}  # above the failure's 12 turns
C13_COMPRESSION = {"strategy": "structured_summary", "trigger": "turns", "every_turns": 2}


@dataclass(frozen=True)
class SegmentedMember:
    """One compressed LongHorizon-v3 episode of C13's group: turns, segments, stop reason, task
    id, final reward and verified score."""

    turns: int
    segments: int
    stop_reason: str
    task_id: str
    reward: float
    verified: int | None


@dataclass(frozen=True)
class C13Result(ClaimResult):
    """Two compressed episodes (``good``, ``bad``) as one GRPO group: the batch ``rows``, the
    trajectories the batch holds (``group_inputs``), ``n_groups``, each trajectory's advantage and
    whether every row's action tokens carry its trajectory's advantage (``segments_share``)."""

    what: ClassVar[str] = "segments are not independent answers (LongHorizon + compression, GRPO update)"
    expected: ClassVar[str] = "3 + 6 segments stay 2 group members"
    kind: ClassVar[str] = EMPIRICAL

    task_index: int
    good: SegmentedMember
    bad: SegmentedMember
    rows: int
    group_inputs: int
    n_groups: int
    trajectory_advantages: tuple[float, ...]
    segments_share: bool

    def passes(self) -> bool:
        """3 + 6 segments in 9 rows stay 2 members of 1 group with advantages +1 / -1 shared by
        their segments, one task id, rewards 1 / 0 and verified 1 / 0."""
        good, bad = self.good, self.bad
        return (good.segments == 3 and bad.segments == 6 and self.rows == 9 and self.group_inputs == 2
                and self.n_groups == 1 and self.trajectory_advantages == (1.0, -1.0) and self.segments_share
                and good.task_id == bad.task_id and (good.reward, bad.reward) == (1.0, 0.0)
                and (good.verified, bad.verified) == (1, 0))

    @property
    def measured(self) -> str:
        good, bad = self.good, self.bad
        return (f"LongHorizon-v3 {C13_ENV} train task {self.task_index} + compression every 2 turns: oracle "
                f"{good.turns} turns -> {good.segments} segments ({good.stop_reason}, reward {good.reward:g}), "
                f"scripted failure {bad.turns} turns -> {bad.segments} segments ({bad.stop_reason}, reward "
                f"{bad.reward:g}); GRPO update: {self.rows} rows, {self.group_inputs} group members with advantages "
                f"{[round(a, 4) for a in self.trajectory_advantages]} in {self.n_groups} group; each trajectory's "
                f"segments share its advantage: {self.segments_share}; task id / final reward / verified per "
                f"trajectory: {good.task_id}: {good.reward:g}/{good.verified}, {bad.task_id}: "
                f"{bad.reward:g}/{bad.verified}")


def _segmented_member(t: Trajectory) -> SegmentedMember:
    return SegmentedMember(turns=t.turns, segments=len(t.segments), stop_reason=str(t.stop_reason),
                           task_id=t.task_id, reward=float(t.train_reward), verified=t.verified)


def measure_c13(task_index: int = 0) -> C13Result:
    """Two compressed LongHorizon-v3 episodes (3 and 6 segments) as one GRPO group of 2 members.

    LongHorizon-v3 (4 stages, turn limit 20) with the compression wrapper (structured summary
    every 2 turns), train task ``task_index``: the oracle (6 turns, reward 1) and a scripted agent
    that reads the notes, asks ``status`` six times, fixes every stage with a wrong approach and
    submits (12 turns, reward 0), as real episodes laid out by ``demo_to_trajectory``; real GRPO
    update (eps 0). Each trajectory's advantage is read on its first action token."""
    start_model_info()

    env = envs.make(envs.LONG_HORIZON_V3_ID, compression=C13_COMPRESSION, **C13_ENV)
    options = {"task_index": task_index, "split": "train"}
    env.reset(seed=0, options=options)
    task = env.unwrapped.task
    wrong = [f"fix {name} {next(a for a in FIX_NAMES if a != task.table[name])}" for name in task.stages]
    script = ["read notes", *["status"] * 6, *wrong, "submit"]
    good = scripted_trajectory(env, OracleAgent(), 0, options)
    bad = scripted_trajectory(env, ScriptAgent(script), 1, options)
    env.close()
    members = [good, bad]
    trainer = make_trainer("grpo", algo_config("grpo", adv_eps=0.0, group_size=2, tasks_per_update=1),
                           start_policy())
    record = run_update(trainer, copy.deepcopy(members))
    batch, adv = record.batch, record.advantages.tokens
    traj_adv = tuple(float(v[0]) for v in trajectory_values(batch, adv))
    act = batch.action_mask > 0
    rates = group_outcome_rates(torch.tensor([t.train_reward for t in members]),
                                torch.tensor([t.group_id for t in members]))
    row_values = [sorted({float(v) for v in adv[r][act[r]].tolist()}) for r in range(batch.num_rows)]
    shares = all(row_values[r] == [traj_adv[int(batch.row_traj[r])]] for r in range(batch.num_rows))
    return C13Result(task_index=task_index, good=_segmented_member(good), bad=_segmented_member(bad),
                     rows=batch.num_rows, group_inputs=len(batch.trajectories), n_groups=int(rates["n_groups"]),
                     trajectory_advantages=traj_adv, segments_share=shares)


# -------------------------------------------------------------------------------------------- C14
@dataclass(frozen=True)
class C14Result(ClaimResult):
    """Per-token advantages of a real GRPO update: sizes, the largest spread inside one
    trajectory, agreement with the independently computed group advantages, env-written tokens
    at 0, mixed groups and the values of the first mixed group (``example``)."""

    what: ClassVar[str] = "outcome-only GRPO: one advantage per trajectory (real rollout batch)"
    expected: ClassVar[str] = "all action tokens of a trajectory share A"
    kind: ClassVar[str] = EMPIRICAL

    rollouts: int
    segments: int
    min_action_tokens: int
    max_action_tokens: int
    max_spread: float
    equal_to_trajectory: bool
    env_tokens_zero: bool
    groups: int
    mixed_groups: int
    successes_above_failures: bool
    example: tuple[float, ...]

    def passes(self) -> bool:
        """No spread inside any trajectory, each value its group advantage, env tokens 0, and in
        every mixed group (at least one) successes > 0 > failures."""
        return (self.max_spread == 0.0 and self.equal_to_trajectory and self.env_tokens_zero
                and self.mixed_groups > 0 and self.successes_above_failures)

    @property
    def measured(self) -> str:
        return (f"grpo update on {self.rollouts} real rollouts (8 tasks x 8, {self.segments} segments, "
                f"{self.min_action_tokens}..{self.max_action_tokens} action tokens per trajectory): max "
                f"within-trajectory advantage spread {self.max_spread:.3g}; equal to the per-trajectory group "
                f"advantage: {self.equal_to_trajectory}; env-written tokens 0: {self.env_tokens_zero}; "
                f"{self.mixed_groups}/{self.groups} groups mixed, successes > 0 > failures in each: "
                f"{self.successes_above_failures} (e.g. " + ", ".join(f"{v:+.3f}" for v in self.example) + ")")


def measure_c14(seed: int = 8) -> C14Result:
    """Per-token advantages of a real GRPO update on a real rollout batch (8 tasks x 8).

    Each trajectory's value is compared with its group advantage computed independently from
    the rewards (``outcome_advantages`` with the trainer's std / eps); a mixed group is one whose
    members' rewards differ."""
    start_model_info()
    torch.set_num_threads(1)
    trajs = list(copy.deepcopy(rollout_batch(seed)))
    algo = algo_config("grpo", group_size=8, tasks_per_update=8)
    trainer = make_trainer("grpo", algo, start_policy())
    record = run_update(trainer, trajs)
    batch, adv = record.batch, record.advantages.tokens
    act = batch.action_mask > 0
    per_traj = trajectory_values(batch, adv)
    values = [float(v[0]) for v in per_traj]
    n_tok = [int(v.numel()) for v in per_traj]
    reference = outcome_advantages(batch.trajectories, algo.std, algo.adv_eps)
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(batch.trajectories):
        groups.setdefault(t.group_id, []).append(i)
    mixed = [g for g, ids in groups.items() if len({batch.trajectories[i].train_reward for i in ids}) > 1]
    above = all(
        min(values[i] for i in ids if batch.trajectories[i].train_reward > 0)
        > 0 > max(values[i] for i in ids if batch.trajectories[i].train_reward == 0)
        for g, ids in groups.items() if g in mixed)
    return C14Result(rollouts=len(trajs), segments=sum(len(t.segments) for t in trajs),
                     min_action_tokens=min(n_tok), max_action_tokens=max(n_tok),
                     max_spread=max(float(v.max() - v.min()) for v in per_traj),
                     equal_to_trajectory=all(abs(v - float(a)) < 1e-6 for v, a in zip(values, reference)),
                     env_tokens_zero=bool((adv[~act] == 0).all()), groups=len(groups), mixed_groups=len(mixed),
                     successes_above_failures=above,
                     example=tuple(values[i] for i in groups[mixed[0]]) if mixed else ())
