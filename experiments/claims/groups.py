"""Group measurements: mixed-group rate vs P_mix (C6), comparison without aligned steps (C12),
segments stay one group member (C13), one advantage per trajectory (C14)."""

from __future__ import annotations

import copy
from functools import lru_cache

import torch

import envs
from algos.advantages import group_mean_std
from algos.batch import Batch, Trajectory
from algos.metrics import binomial_confidence_interval, group_outcome_rates, mixed_group_probability
from algos.rollout import RolloutRequest, make_requests
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

# --------------------------------------------------------------------------------------------- C6
def group_rates(trajs: list[Trajectory], group_size: int) -> dict:
    """Outcome statistics over the groups whose ``group_size`` members are all live (a masked
    episode is an infrastructure failure, not an outcome): ``groups``, ``mixed_groups``,
    ``mixed_rate`` (from ``algos.metrics.group_outcome_rates`` on the training reward),
    ``successes`` and ``trials`` (members with reward > 0 / all members), ``p_hat`` =
    successes / trials and ``p_mix`` = ``mixed_group_probability(p_hat, group_size)``."""
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
    return {"groups": n, "mixed_groups": round(rates["mixed"] * n), "mixed_rate": float(rates["mixed"]),
            "successes": successes, "trials": len(live), "p_hat": p_hat,
            "p_mix": mixed_group_probability(p_hat, group_size)}


def measure_c6(group_size: int = 8, n_groups: int = 120, task_index: int = 0, hard_task_index: int = 0,
               seed: int = 6) -> dict:
    """Mixed-group rate of real GRPO groups in three settings, ``n_groups`` groups of ``group_size``
    (measured once per argument set in a process, like the claims' trainer runs: the table and
    its tests read the same numbers; each call gets its own copy).

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
    return copy.deepcopy(_measure_c6(group_size, n_groups, task_index, hard_task_index, seed))


@lru_cache(maxsize=2)
def _measure_c6(group_size: int, n_groups: int, task_index: int, hard_task_index: int, seed: int) -> dict:
    start_model_info()
    torch.set_num_threads(1)
    policy = start_policy()
    engine = make_engine()
    train = {"task_index": task_index, "split": "train"}
    held = {"task_index": hard_task_index, "split": "heldout"}
    reqs = make_requests(n_groups, group_size, seed=seed, task_indices=[task_index] * n_groups)
    independent = group_rates(collect(engine, policy, reqs, seed), group_size)
    lo, hi = binomial_confidence_interval(independent["mixed_groups"], independent["groups"])
    independent.update(ci_low=float(lo), ci_high=float(hi))
    base = make_requests(n_groups, 1, seed=seed + 1, task_indices=[task_index] * n_groups)
    shared: list[Trajectory] = []
    for _ in range(group_size):
        shared.extend(collect(engine, policy, [RolloutRequest(r.options, r.seed, r.group_id) for r in base], seed + 1))
    distinct: dict[int, set] = {}
    for t in shared:
        distinct.setdefault(t.group_id, set()).add(tuple(tok for s in t.segments for tok in s.tokens))
    shared_seed = {**group_rates(shared, group_size), "identical_groups": sum(len(v) == 1 for v in distinct.values())}
    half = n_groups // 2
    mreqs = [RolloutRequest(train if r.group_id < half else held, r.seed, r.group_id)
             for r in make_requests(n_groups, group_size, seed=seed + 2, task_indices=[task_index] * n_groups)]
    mix = collect(engine, policy, mreqs, seed + 2)
    engine.close()
    easy = [t.train_reward > 0 for t in mix if t.group_id < half]
    hard = [t.train_reward > 0 for t in mix if t.group_id >= half]
    mixed_tasks = {**group_rates(mix, group_size), "p_train": sum(easy) / max(len(easy), 1),
                   "p_heldout": sum(hard) / max(len(hard), 1)}
    return {"group_size": group_size, "task_index": task_index, "hard_task_index": hard_task_index,
            "independent": independent, "shared_seed": shared_seed, "mixed_tasks": mixed_tasks}


# -------------------------------------------------------------------------------------------- C12
def trajectory_values(batch: Batch, token_advantages: torch.Tensor) -> list[torch.Tensor]:
    """The advantages on each trajectory's action tokens (all its rows, in row order), one 1-D
    tensor per trajectory of ``batch``."""
    act = batch.action_mask > 0
    return [token_advantages[(batch.row_traj == i)[:, None] & act] for i in range(len(batch.trajectories))]


def measure_c12(task_index: int = 0) -> dict:
    """A 4-turn success and a 10-turn failure in one GRPO group (population std, eps 0).

    Real easy-BugFix episodes (faults off, train task ``task_index``, seeds 0 and 1) laid out by
    ``demo_to_trajectory``: a scripted agent that knows the fix (run tests, fix, run tests, submit)
    and one that lists files 9 times and submits. Both go through the real GRPO update. Returns per
    member (``win`` / ``lose``) its turns, stop reason, reward, verified score and action tokens;
    the group ``mean`` / ``std`` (``group_mean_std``), the advantage the trainer put on each
    trajectory's first action token (``trajectory_advantages``) and whether every action token
    carries its trajectory's value (``broadcast``) and every other token 0 (``env_tokens_zero``)."""
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
    traj_adv = [float(t[0]) for t in tok]
    member = {name: {"turns": t.turns, "stop_reason": str(t.stop_reason), "reward": float(t.train_reward),
                     "verified": t.verified, "action_tokens": int(tok[i].numel())}
              for i, (name, t) in enumerate((("win", win), ("lose", lose)))}
    return {"task_index": task_index, **member, "mean": float(mean[0]), "std": float(sd[0]),
            "trajectory_advantages": traj_adv,
            "broadcast": all(bool((t == a).all()) for t, a in zip(tok, traj_adv)),
            "env_tokens_zero": bool((adv[~act] == 0).all())}


# -------------------------------------------------------------------------------------------- C13
C13_ENV = {"n_stages": 4, "max_turns": 20}  # above the failure's 12 turns
C13_COMPRESSION = {"strategy": "structured_summary", "trigger": "turns", "every_turns": 2}


def measure_c13(task_index: int = 0) -> dict:
    """Two compressed LongHorizon-v3 episodes (3 and 6 segments) as one GRPO group of 2 members.

    LongHorizon-v3 (4 stages, turn limit 20) with the compression wrapper (structured summary
    every 2 turns), train task ``task_index``: the oracle (6 turns, reward 1) and a scripted agent
    that reads the notes, asks ``status`` six times, fixes every stage with a wrong approach and
    submits (12 turns, reward 0), as real episodes laid out by ``demo_to_trajectory``; real GRPO
    update (eps 0). Returns per member (``good`` / ``bad``) turns, segments, stop reason, task id,
    reward and verified score; the batch ``rows``, the trajectories the trainer's batch holds
    (``group_inputs``: the group members its advantages are computed over), ``n_groups``, each
    trajectory's advantage (on its first action token, ``trajectory_advantages``) and whether
    every row's action tokens carry its trajectory's advantage (``segments_share``)."""
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
    traj_adv = [float(v[0]) for v in trajectory_values(batch, adv)]
    act = batch.action_mask > 0
    rates = group_outcome_rates(torch.tensor([t.train_reward for t in members]),
                                torch.tensor([t.group_id for t in members]))
    row_values = [sorted({float(v) for v in adv[r][act[r]].tolist()}) for r in range(batch.num_rows)]
    shares = all(row_values[r] == [traj_adv[int(batch.row_traj[r])]] for r in range(batch.num_rows))
    member = {name: {"turns": t.turns, "segments": len(t.segments), "stop_reason": str(t.stop_reason),
                     "task_id": t.task_id, "reward": float(t.train_reward), "verified": t.verified}
              for name, t in (("good", good), ("bad", bad))}
    return {"task_index": task_index, **member, "rows": batch.num_rows, "group_inputs": len(batch.trajectories),
            "n_groups": int(rates["n_groups"]), "trajectory_advantages": traj_adv, "segments_share": shares}


# -------------------------------------------------------------------------------------------- C14
def measure_c14(seed: int = 8) -> dict:
    """Per-token advantages of a real GRPO update on a real rollout batch (8 tasks x 8).

    Returns ``rollouts``, ``segments``, the min / max action tokens per trajectory, the largest
    spread of advantages among one trajectory's action tokens (``max_spread``), whether each
    trajectory's value equals its group advantage computed independently from the rewards
    (``outcome_advantages`` with the trainer's std / eps: ``equal_to_trajectory``),
    whether env-written tokens have 0 (``env_tokens_zero``), ``groups`` and ``mixed_groups``,
    whether in every mixed group every success is > 0 > every failure (``successes_above_failures``)
    and the values of the first mixed group (``example``)."""
    start_model_info()
    torch.set_num_threads(1)
    trajs = list(copy.deepcopy(rollout_batch(seed)))
    algo = algo_config("grpo", group_size=8, tasks_per_update=8)
    trainer = make_trainer("grpo", algo, start_policy())
    record = run_update(trainer, trajs)
    batch, adv = record.batch, record.advantages.tokens
    act = batch.action_mask > 0
    per_traj = trajectory_values(batch, adv)
    spreads = [float(v.max() - v.min()) for v in per_traj]
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
    return {"rollouts": len(trajs), "segments": sum(len(t.segments) for t in trajs),
            "min_action_tokens": min(n_tok), "max_action_tokens": max(n_tok), "max_spread": max(spreads),
            "equal_to_trajectory": all(abs(v - float(a)) < 1e-6 for v, a in zip(values, reference)),
            "env_tokens_zero": bool((adv[~act] == 0).all()), "groups": len(groups), "mixed_groups": len(mixed),
            "successes_above_failures": above,
            "example": [values[i] for i in groups[mixed[0]]] if mixed else []}
