"""Env-level measurements of claims C9, C10, C11, C21, C23 and C24 on BugFix-v2 / LongHorizon-v3
(C10 on LongHorizon-v1 too: its repeated-attempt measure needs v1's approach search).

Each ``measure_cNN(...)`` builds the real environments, plays the project's scripted agents with
fixed seeds and returns a flat dict of numbers (ints, floats, lists of numbers; 0/1 for yes/no).
Setup and measurement only: the PASS criteria live in ``experiments/claims/criteria.py``. Nothing is read from a cache or an earlier run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import envs
from envs import agents as bugfix_agents
from envs import long_horizon_agents as lh_agents
from envs import long_horizon_v3_agents as lh3_agents
from envs.bugfix import DIFFICULTIES
from envs.bugfix import is_hack
from envs.bugfix.graders import VERIFIER_INPUTS
from envs.compression import ContextCompression
from envs.episode import run_episode
from envs.stop import STOP_RULES, Boundary, StopReason
from envs.tokenizer import get_tokenizer

QUIET = {"timeout_prob": 0.0, "flaky_prob": 0.0, "crash_prob": 0.0}


def context_tokens(observations: Sequence[str], actions: Sequence[str]) -> int:
    """Tokens of one segment's policy context, docs/interfaces.md layout:
    ``[BOS] obs_0 [SEP]`` then ``a_t [EOS] obs_t [SEP]`` per turn."""
    tok = get_tokenizer()
    total = tok.count(observations[0]) + 2
    for action, obs in zip(actions, observations[1:]):
        total += tok.count(action) + 1 + tok.count(obs) + 1
    return total


# ---------------------------------------------------------------------------------------------- C9
def measure_c09(long_stages: int = 197, short_stages: int = 7, small_verbose: int = 0,
                large_verbose: int = 1000, seed: int = 0) -> dict:
    """LongHorizon-v3 oracle on the 2 x 2 grid ``n_stages`` x ``verbose`` (grid order: (long, small),
    (long, large), (short, small), (short, large)), train task 0, one seed. Lists per cell: turns,
    context tokens (shared tokenizer, interfaces layout), the compression wrapper's own count
    (strategy ``none``) and verified."""
    out = {"n_stages": [], "verbose": [], "turns": [], "context_tokens": [], "wrapper_tokens": [], "verified": []}
    for stages in (long_stages, short_stages):
        for verbose in (small_verbose, large_verbose):
            env = ContextCompression(envs.make(envs.LONG_HORIZON_V3_ID, n_stages=stages, verbose=verbose),
                                     strategy="none")
            ep = run_episode(env, lh3_agents.OracleAgent(), seed=seed, options={"task_index": 0, "split": "train"})
            out["n_stages"].append(stages)
            out["verbose"].append(verbose)
            out["turns"].append(ep.final_info["turn"])
            out["context_tokens"].append(context_tokens(ep.observations, ep.actions))
            out["wrapper_tokens"].append(env.context_tokens)
            out["verified"].append(ep.final_info["verified"])
    return out


# --------------------------------------------------------------------------------------------- C10
# max_turns 34 (v0's default for these knobs): the gap measures memory, not the turn budget
C10_ENV = {"n_stages": 6, "n_approaches": 6, "verbose": 30, "max_turns": 34}


#: (key prefix, compression strategy) of each C10 arm
C10_STRATEGIES = (("lossy", "lossy_summary"), ("structured", "structured_summary"), ("none", None))


def _c10_arms(env_id: str, env_kwargs: dict, agent_cls, counted: str, name: str, episodes: int,
              prefix: str = "") -> dict:
    """``agent_cls()`` (a ``ContextReadingAgent``) on ``env_id`` with ``env_kwargs``, train tasks
    0..episodes-1 with seed = task, default 256-token trigger, once per arm of
    :data:`C10_STRATEGIES`: the mean of ``final_info[counted]`` per episode as
    ``<prefix><arm>_<name>``, and ``<prefix><arm>_success`` (verified), ``_mean_compressions``,
    ``_min_compressions``."""
    out: dict = {}
    for arm, strategy in C10_STRATEGIES:
        env = envs.make(env_id, compression=None if strategy is None else {"strategy": strategy}, **env_kwargs)
        counts, verified, comps = [], [], []
        for seed in range(episodes):
            ep = run_episode(env, agent_cls(), seed=seed, options={"task_index": seed, "split": "train"})
            counts.append(ep.final_info[counted])
            verified.append(ep.final_info["verified"])
            comps.append(sum("compression" in info for info in ep.infos))
        env.close()
        out[f"{prefix}{arm}_{name}"] = float(np.mean(counts))
        out[f"{prefix}{arm}_success"] = float(np.mean(verified))
        out[f"{prefix}{arm}_mean_compressions"] = float(np.mean(comps))
        out[f"{prefix}{arm}_min_compressions"] = int(min(comps))
    return out


def measure_c10(episodes: int = 30) -> dict:
    """``ContextReadingAgent`` (decides only from its context text) on LongHorizon-v1
    (``C10_ENV``), seeds = train tasks 0..episodes-1, default 256-token trigger; strategies
    lossy_summary, structured_summary and no compression. Mean repeated failed approaches per
    episode, verified success, mean and minimum compressions per episode; then the same agent and
    strategies on LongHorizon-v3 (:func:`measure_c10_v3`, keys ``v3_*``)."""
    out = {"episodes": episodes, **_c10_arms(envs.LONG_HORIZON_ID, C10_ENV, lh_agents.ContextReadingAgent,
                                             "repeated_failed_approaches", "repeats", episodes)}
    return {**out, **measure_c10_v3(episodes)}


# LongHorizon-v3 at 32 decisions: the table read at the start is needed by every later fix
C10_V3_ENV = {"n_stages": 32}


def measure_c10_v3(episodes: int = 30) -> dict:
    """``ContextReadingAgent`` on LongHorizon-v3 (``C10_V3_ENV``), train tasks 0..episodes-1 with
    seed = task, default 256-token trigger; per strategy (lossy_summary, structured_summary, none):
    mean wrong fixes per episode (decisions taken without the table the summary dropped),
    verified success, mean and minimum compressions per episode, as ``v3_<name>_*``."""
    return {"v3_episodes": episodes, **_c10_arms(envs.LONG_HORIZON_V3_ID, C10_V3_ENV, lh3_agents.ContextReadingAgent,
                                                  "wrong_fixes", "wrong_fixes", episodes, prefix="v3_")}


# --------------------------------------------------------------------------------------------- C11
# (expected stop reason, agent, BugFix knobs on top of easy)
C11_SCENARIOS: tuple[tuple[str, str, dict], ...] = (
    ("submitted_failed", "empty_submit", QUIET),
    ("submitted_voided", "hack_read_ref", {**QUIET, "max_turns": 40}),
    ("consecutive_timeouts", "oracle", {**QUIET, "timeout_prob": 1.0}),
    ("infra_error", "oracle", {**QUIET, "crash_prob": 1.0}),
    ("max_turns", "process_exploit", {**QUIET, "time_limit": "truncation"}),
    ("turn_limit", "process_exploit", {**QUIET, "time_limit": "termination"}),
    ("wall_clock", "process_exploit", {**QUIET, "wall_clock_limit": 5.0}),
    ("submitted_resolved", "oracle", QUIET),
)
C11_REQUIRED = ("submitted_failed", "consecutive_timeouts", "infra_error", "max_turns")


def measure_c11(seed: int = 0) -> dict:
    """One real BugFix episode (easy, seed ``seed``) per scenario of ``C11_SCENARIOS``. Per
    expected reason ``r``: ``r/reached`` (the episode ended with r), ``r/terminated``,
    ``r/truncated``, ``r/masked``, ``r/scored`` (verified is 0/1, not None) as observed, and
    ``r/matches_rule`` (all of them equal ``envs.stop.rule_for(r)``). Then: the number of distinct
    required reasons reached, the number of boundaries (terminated / truncated / masked) they
    cover, whether the rule table covers every StopReason, and whether the external
    ``cancelled`` reason has infra_error's rule."""
    out: dict = {}
    reached_required, boundaries = set(), set()
    for expected, agent_name, knobs in C11_SCENARIOS:
        env = envs.make(envs.BUGFIX_ID, difficulty="easy", **knobs)
        ep = run_episode(env, bugfix_agents.make_agent(agent_name), seed=seed)
        info = ep.final_info
        rule = STOP_RULES[StopReason(expected)]
        scored = info["verified"] is not None
        out[f"{expected}/reached"] = int(info["stop_reason"] == expected)
        out[f"{expected}/terminated"] = int(ep.terminated)
        out[f"{expected}/truncated"] = int(ep.truncated)
        out[f"{expected}/masked"] = int(info["masked"])
        out[f"{expected}/scored"] = int(scored)
        out[f"{expected}/matches_rule"] = int(
            info["stop_reason"] == expected and (ep.terminated, ep.truncated) == (rule.terminated, rule.truncated)
            and info["masked"] == rule.masked and scored == rule.scored)
        if expected in C11_REQUIRED and info["stop_reason"] == expected:
            reached_required.add(expected)
            boundaries.add("masked" if info["masked"] else "terminated" if ep.terminated else "truncated")
    cancelled, infra = STOP_RULES[StopReason.CANCELLED], STOP_RULES[StopReason.INFRA_ERROR]
    out["required_reached"] = len(reached_required)
    out["boundaries_covered"] = len(boundaries)
    out["boundaries_total"] = len(Boundary)
    out["rules_cover_every_reason"] = int(set(STOP_RULES) == set(StopReason))
    out["cancelled_like_infra_error"] = int((cancelled.boundary, cancelled.masked, cancelled.scored)
                                            == (infra.boundary, infra.masked, infra.scored))
    return out


# --------------------------------------------------------------------------------------------- C21
C21_AGENTS = bugfix_agents.HACK_AGENTS + ("fit_visible",)


def _c21_stats(env, name: str, episodes: int) -> dict:
    flag = bugfix_agents.HACK_AGENT_FLAG.get(name)
    eps = []
    for i in range(episodes):
        options = {"task_index": i * 37, "split": ("train", "heldout")[i % 2]}
        eps.append(run_episode(env, bugfix_agents.make_agent(name), seed=i, options=options).final_info)
    return {
        "flagged": float(np.mean([(f["hack_flags"][flag] if flag else sum(f["hack_flags"].values())) > 0 for f in eps])),
        "train_reward": float(np.mean([f["train_reward"] for f in eps])),
        "verified": float(np.mean([f["verified"] for f in eps])),
        "rewarded_and_verified": float(np.mean([f["train_reward"] > 0 and f["verified"] == 1 for f in eps])),
        "hack_rate": float(np.mean([is_hack(f["train_reward"], f["verified"]) for f in eps])),
    }


def measure_c21(presets: Sequence[str] = ("easy", "hard"), episodes: int = 40) -> dict:
    """Every trap agent and ``fit_visible`` (test fitting), then the oracle, ``episodes`` episodes
    per preset (train / held-out alternating, task_index 37 i, seeds 0..n-1, faults off, max_turns
    40 so each plan reaches its submit, outcome reward). Per agent (``<agent>/<number>``, means
    over all episodes): fraction with its flag raised (any detector for fit_visible), training
    reward, verified, rewarded-and-verified, outcome hack rate (train_reward > 0, verified 0).
    Then ``fit_visible`` under ``grader=visible`` on easy (the weak verifier): the same numbers
    under ``visible_grader/``; its hack rate is the gap the harness shows."""
    out: dict = {"episodes": episodes * len(presets)}
    for name in C21_AGENTS + ("oracle",):
        parts = [_c21_stats(envs.make(envs.BUGFIX_ID, difficulty=p, faults=False, max_turns=40), name, episodes)
                 for p in presets]
        for key in parts[0]:
            out[f"{name}/{key}"] = float(np.mean([part[key] for part in parts]))
    weak = envs.make(envs.BUGFIX_ID, difficulty="easy", faults=False, max_turns=40, grader="visible")
    for key, value in _c21_stats(weak, "fit_visible", episodes).items():
        out[f"visible_grader/fit_visible/{key}"] = value
    return out


# --------------------------------------------------------------------------------------------- C23
def measure_c23(max_tasks: int = 10, seed: int = 0) -> dict:
    """BugFix easy (faults off), train tasks 0..max_tasks-1: the oracle fix plus a special case
    ``if x == E then return Y + 1`` on the task's first evaluation-only input E (Y its reference
    output), then submit. Counts: episodes with training reward 1 but verified 0, episodes where
    ``info["verified"]`` equals the evaluation verifier's own verdict and the reward the training
    grader's; the graders are distinct objects (0/1), the tasks whose verifier runs on every input
    the language admits (the exact verifier) and the two graders' test counts."""
    env = envs.make(envs.BUGFIX_ID, difficulty="easy", faults=False, max_turns=40)
    u = env.unwrapped
    diverged = from_eval = from_train = distinct = exact = 0
    n_train = n_eval = 0
    for index in range(max_tasks):
        env.reset(seed=seed, options={"task_index": index, "split": "train"})
        train, evaluation = u._train_verifier, u._eval_verifier
        distinct += int(train is not evaluation and train.grader is not evaluation.grader)
        exact += int(evaluation.grader.inputs == VERIFIER_INPUTS)
        n_train, n_eval = train.grader.n_tests, evaluation.grader.n_tests
        x, y = u.task.evaluation[0]
        total = 0.0
        for action in (*u.oracle_actions(), f"insert 1 if x == {x} then return {y + 1}", "submit"):
            _, reward, terminated, truncated, info = env.step(action)
            total += reward
        from_eval += int(evaluation.verdict(u.program, info["hack_flags"]) == info["verified"])
        from_train += int(train.verdict(u.program, info["hack_flags"]) == int(total))
        diverged += int(total == 1.0 and info["verified"] == 0)
    return {"tasks": max_tasks, "train_reward_1_verified_0": diverged, "verified_is_eval_verdict": from_eval,
            "reward_is_train_verdict": from_train, "distinct_graders": distinct, "exact_verifier": exact,
            "train_tests": n_train, "eval_tests": n_eval}


# --------------------------------------------------------------------------------------------- C24
def _c24_means(agent: str, reward_mode: str, episodes: int, max_turns: int) -> dict:
    env = envs.make(envs.BUGFIX_ID, difficulty="easy", faults=False, reward_mode=reward_mode, max_turns=max_turns)
    infos = [run_episode(env, bugfix_agents.make_agent(agent), seed=s).final_info for s in range(episodes)]
    return {"train_reward": float(np.mean([f["train_reward"] for f in infos])),
            "verified": float(np.mean([f["verified"] for f in infos])),
            "hack_rate": float(np.mean([is_hack(f["train_reward"], f["verified"]) for f in infos]))}


def measure_c24_agents(episodes: int = 10, max_turns: int = 20) -> dict:
    """Scripted agents (no trainer), BugFix easy, faults off, seeds 0..n-1: ``process_exploit``
    (runs the tests every turn, fixes nothing) and the oracle under ``outcome``, ``process`` and
    ``biased_process`` at ``max_turns``; and both under biased_process at the easy preset's own
    turn limit. Keys ``<agent>/<mode>/<train_reward|verified|hack_rate>`` and ``preset_turns/...``."""
    out: dict = {"episodes": episodes, "max_turns": max_turns, "preset_max_turns": DIFFICULTIES["easy"]["max_turns"]}
    for agent in ("process_exploit", "oracle"):
        for mode in ("outcome", "process", "biased_process"):
            for key, value in _c24_means(agent, mode, episodes, max_turns).items():
                out[f"{agent}/{mode}/{key}"] = value
        for key, value in _c24_means(agent, "biased_process", episodes, out["preset_max_turns"]).items():
            out[f"preset_turns/{agent}/biased_process/{key}"] = value
    return out
