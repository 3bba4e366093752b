"""Env-level claims C9, C10, C11, C21, C23 and C24 (its scripted-agent part) on BugFix-v2 /
LongHorizon-v3 (C10 on LongHorizon-v1 too: its repeated-attempt measure needs v1's approach search).

Each ``measure_cNN(...)`` builds the real environments, plays the project's scripted agents with
fixed seeds and returns its claim's frozen result: the measured numbers as fields, the row's texts
and the pass rule next to them. Nothing is read from a cache or an earlier run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

import envs
from envs import long_horizon_agents as lh_agents
from envs import long_horizon_v3_agents as lh3_agents
from envs.bugfix import DIFFICULTIES
from envs.bugfix import agents as bugfix_agents
from envs.bugfix import is_hack
from envs.bugfix.graders import VERIFIER_INPUTS
from envs.compression import ContextCompression
from envs.episode import run_episode
from envs.stop import STOP_RULES, Boundary, StopReason
from envs.tokenizer import get_tokenizer
from experiments.claims.result import EMPIRICAL, ClaimResult

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
STEP_UNIT = "step = one tool call (turn)"


@dataclass(frozen=True)
class HorizonCell:
    """One LongHorizon-v3 oracle episode of the C9 grid: its knobs, turns, context tokens (shared
    tokenizer, interfaces layout), the compression wrapper's own count and the verified score."""

    n_stages: int
    verbose: int
    turns: int
    context_tokens: int
    wrapper_tokens: int
    verified: int


@dataclass(frozen=True)
class C9Result(ClaimResult):
    """The four cells of the ``n_stages`` x ``verbose`` grid, in the order (long, small), (long,
    large), (short, small), (short, large)."""

    what: ClassVar[str] = "long context is not long horizon (LongHorizon oracle, 2x2 n_stages x verbose)"
    expected: ClassVar[str] = "step unit stated; horizon and context configurable independently"
    kind: ClassVar[str] = EMPIRICAL

    cells: tuple[HorizonCell, ...]

    def passes(self) -> bool:
        """Every oracle episode verified; tokenizer count == wrapper count; turns depend only on
        n_stages (n_stages + 2 for both verbose values: read notes, one fix per stage, submit);
        context grows with verbose at a fixed horizon; the (long, small) cell has >= 10x the turns
        of the (short, large) one but fewer tokens."""
        c = self.cells
        ok = all(x.verified == 1 for x in c) and self.counts_agree
        for i in (0, 2):
            ok &= (c[i].turns == c[i + 1].turns == c[i].n_stages + 2
                   and c[i + 1].context_tokens > c[i].context_tokens)
        return bool(ok and c[0].turns >= 10 * c[3].turns and c[0].context_tokens < c[3].context_tokens)

    @property
    def counts_agree(self) -> bool:
        """The shared tokenizer's count equals the wrapper's in every cell."""
        return all(x.context_tokens == x.wrapper_tokens for x in self.cells)

    @property
    def measured(self) -> str:
        cells = "; ".join(f"n_stages={x.n_stages}, verbose={x.verbose}: {x.turns} turns, {x.context_tokens} "
                          f"context tokens" for x in self.cells)
        return (f"{STEP_UNIT}; LongHorizon-v3 oracle, seed 0, task 0: {cells}; oracle verified "
                f"{sum(x.verified for x in self.cells)}/4; tokenizer count == wrapper count: {self.counts_agree}")


def measure_c09(long_stages: int = 197, short_stages: int = 7, small_verbose: int = 0,
                large_verbose: int = 1000, seed: int = 0) -> C9Result:
    """LongHorizon-v3 oracle on the 2 x 2 grid ``n_stages`` x ``verbose`` (grid order: (long, small),
    (long, large), (short, small), (short, large)), train task 0, one seed: one
    :class:`HorizonCell` per cell."""
    cells = []
    for stages in (long_stages, short_stages):
        for verbose in (small_verbose, large_verbose):
            env = ContextCompression(envs.make(envs.LONG_HORIZON_V3_ID, n_stages=stages, verbose=verbose),
                                     strategy="none")
            ep = run_episode(env, lh3_agents.OracleAgent(), seed=seed, options={"task_index": 0, "split": "train"})
            cells.append(HorizonCell(n_stages=stages, verbose=verbose, turns=ep.final_info["turn"],
                                     context_tokens=context_tokens(ep.observations, ep.actions),
                                     wrapper_tokens=env.context_tokens, verified=ep.final_info["verified"]))
    return C9Result(cells=tuple(cells))


# --------------------------------------------------------------------------------------------- C10
# max_turns 34 (v0's default for these knobs): the gap measures memory, not the turn budget
C10_ENV = {"n_stages": 6, "n_approaches": 6, "verbose": 30, "max_turns": 34}
# LongHorizon-v3 at 32 decisions: the table read at the start is needed by every later fix
C10_V3_ENV = {"n_stages": 32}
C10_MARGIN = 3.0


@dataclass(frozen=True)
class SummaryArm:
    """One compression strategy's episodes: the mean per episode of the counted mistake
    (``per_episode``), verified success, mean and minimum compressions per episode."""

    per_episode: float
    success: float
    mean_compressions: float
    min_compressions: int


@dataclass(frozen=True)
class SummaryArms:
    """The ``ContextReadingAgent`` on one env under ``lossy_summary``, ``structured_summary`` and
    no compression (``none``); ``counted`` is the ``final_info`` key of the mistake counted."""

    episodes: int
    counted: str
    lossy: SummaryArm
    structured: SummaryArm
    none: SummaryArm

    def gap(self) -> float:
        """Lossy minus structured mistakes per episode."""
        return self.lossy.per_episode - self.structured.per_episode


@dataclass(frozen=True)
class C10Result(ClaimResult):
    """Repeated failed approaches on LongHorizon-v1 (``v1``) and wrong fixes on LongHorizon-v3
    (``v3``) per compression strategy."""

    what: ClassVar[str] = ("lossy summary drops what the next decision needs (ContextReadingAgent, lossy vs "
                           "structured)")
    expected: ClassVar[str] = "more repeated fixes with 'tests failed' summary"
    kind: ClassVar[str] = EMPIRICAL

    v1: SummaryArms
    v3: SummaryArms

    def passes(self) -> bool:
        """On LongHorizon-v1, lossy repeats exceed structured repeats by >= 3 failed approaches
        per episode; on LongHorizon-v3, lossy wrong fixes exceed structured ones by >= 3 per
        episode; both strategies compressed in every episode of both envs (so the gap comes from
        the summary content)."""
        return (self.v1.gap() >= C10_MARGIN and self.v3.gap() >= C10_MARGIN
                and min(arm.min_compressions for env in (self.v1, self.v3)
                        for arm in (env.lossy, env.structured)) >= 1)

    @property
    def measured(self) -> str:
        a, b = self.v1, self.v3
        return (f"ContextReadingAgent, LongHorizon-v1 {C10_ENV}, {a.episodes} episodes, token trigger 256: "
                f"repeated failed approaches per episode lossy_summary {a.lossy.per_episode:.2f} vs structured_summary "
                f"{a.structured.per_episode:.2f} (need a gap >= {C10_MARGIN:g}); verified success "
                f"{a.lossy.success:.2f} vs {a.structured.success:.2f}; compressions per episode "
                f"{a.lossy.mean_compressions:.1f} vs {a.structured.mean_compressions:.1f} (min "
                f"{a.lossy.min_compressions} / {a.structured.min_compressions}); no compression: "
                f"{a.none.per_episode:.2f} repeats, success {a.none.success:.2f}. "
                f"LongHorizon-v3 {C10_V3_ENV}, {b.episodes} episodes: wrong fixes per episode (decisions "
                f"without the table) lossy_summary {b.lossy.per_episode:.2f} vs structured_summary "
                f"{b.structured.per_episode:.2f} (need a gap >= {C10_MARGIN:g}); verified success "
                f"{b.lossy.success:.2f} vs {b.structured.success:.2f}; compressions per episode "
                f"{b.lossy.mean_compressions:.1f} vs {b.structured.mean_compressions:.1f} (min "
                f"{b.lossy.min_compressions} / {b.structured.min_compressions}); no compression: "
                f"{b.none.per_episode:.2f} wrong fixes, success {b.none.success:.2f}")


def _c10_arm(env_id: str, env_kwargs: dict, agent_cls, counted: str, strategy: str | None,
             episodes: int) -> SummaryArm:
    """``agent_cls()`` on ``env_id`` with ``env_kwargs`` under compression ``strategy`` (None: no
    compression), train tasks 0..episodes-1 with seed = task, default 256-token trigger."""
    env = envs.make(env_id, compression=None if strategy is None else {"strategy": strategy}, **env_kwargs)
    counts, verified, comps = [], [], []
    for seed in range(episodes):
        ep = run_episode(env, agent_cls(), seed=seed, options={"task_index": seed, "split": "train"})
        counts.append(ep.final_info[counted])
        verified.append(ep.final_info["verified"])
        comps.append(sum("compression" in info for info in ep.infos))
    env.close()
    return SummaryArm(per_episode=float(np.mean(counts)), success=float(np.mean(verified)),
                      mean_compressions=float(np.mean(comps)), min_compressions=int(min(comps)))


def _c10_arms(env_id: str, env_kwargs: dict, agent_cls, counted: str, episodes: int) -> SummaryArms:
    """:func:`_c10_arm` under ``lossy_summary``, ``structured_summary`` and no compression, the
    mean of ``final_info[counted]`` per episode as each arm's ``per_episode``."""
    arms = [_c10_arm(env_id, env_kwargs, agent_cls, counted, s, episodes)
            for s in ("lossy_summary", "structured_summary", None)]
    return SummaryArms(episodes, counted, *arms)


def measure_c10(episodes: int = 30) -> C10Result:
    """``ContextReadingAgent`` (decides only from its context text) on LongHorizon-v1
    (``C10_ENV``), seeds = train tasks 0..episodes-1, default 256-token trigger; strategies
    lossy_summary, structured_summary and no compression: repeated failed approaches per episode,
    verified success, mean and minimum compressions per episode; then the same agent and
    strategies on LongHorizon-v3 (:func:`measure_c10_v3`)."""
    v1 = _c10_arms(envs.LONG_HORIZON_ID, C10_ENV, lh_agents.ContextReadingAgent, "repeated_failed_approaches",
                   episodes)
    return C10Result(v1=v1, v3=measure_c10_v3(episodes))


def measure_c10_v3(episodes: int = 30) -> SummaryArms:
    """``ContextReadingAgent`` on LongHorizon-v3 (``C10_V3_ENV``), train tasks 0..episodes-1 with
    seed = task, default 256-token trigger; per strategy (lossy_summary, structured_summary, none):
    mean wrong fixes per episode (decisions taken without the table the summary dropped),
    verified success, mean and minimum compressions per episode."""
    return _c10_arms(envs.LONG_HORIZON_V3_ID, C10_V3_ENV, lh3_agents.ContextReadingAgent, "wrong_fixes", episodes)


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


@dataclass(frozen=True)
class StopScenario:
    """One BugFix episode meant to end with ``reason``: whether it did (``reached``), its observed
    flags, whether it was scored (verified 0/1, not None) and whether all of them equal
    ``envs.stop.rule_for(reason)`` (``matches_rule``)."""

    reason: str
    agent: str
    reached: bool
    terminated: bool
    truncated: bool
    masked: bool
    scored: bool
    matches_rule: bool

    @property
    def text(self) -> str:
        """``reason (agent): terminated=0/1 ... match``."""
        return (f"{self.reason} ({self.agent}): terminated={int(self.terminated)} truncated={int(self.truncated)} "
                f"masked={int(self.masked)} scored={int(self.scored)} {'match' if self.matches_rule else 'MISMATCH'}")


@dataclass(frozen=True)
class C11Result(ClaimResult):
    """One :class:`StopScenario` per entry of :data:`C11_SCENARIOS`, the required reasons reached,
    the boundaries they cover, and two properties of the rule table."""

    what: ClassVar[str] = "stopping is not one thing (real BugFix episodes per stop reason)"
    expected: ClassVar[str] = "distinct stop reasons, each with continue / score rule"
    kind: ClassVar[str] = EMPIRICAL

    scenarios: tuple[StopScenario, ...]
    required_reached: int
    boundaries_covered: int
    boundaries_total: int
    rules_cover_every_reason: bool
    cancelled_like_infra_error: bool

    def passes(self) -> bool:
        """Every scenario reaches its reason and matches the rule table; the four required reasons
        are distinct and cover terminated, truncated and masked; the table covers every reason and
        ``cancelled`` has infra_error's masked rule."""
        return (all(s.reached and s.matches_rule for s in self.scenarios)
                and self.required_reached == len(C11_REQUIRED) and self.boundaries_covered == self.boundaries_total
                and self.rules_cover_every_reason and self.cancelled_like_infra_error)

    @property
    def measured(self) -> str:
        return ("BugFix-v2 easy, seed 0: " + "; ".join(s.text for s in self.scenarios)
                + f"; required reasons distinct: {self.required_reached}/{len(C11_REQUIRED)}, boundaries covered: "
                f"{self.boundaries_covered}/{self.boundaries_total}; 'cancelled' has infra_error's rule: "
                f"{self.cancelled_like_infra_error}; 'token_budget' is written by the rollout engine")


def _stop_scenario(expected: str, agent_name: str, knobs: dict, seed: int) -> tuple[StopScenario, str]:
    """One easy BugFix episode of ``agent_name`` with ``knobs``: its :class:`StopScenario` and the
    boundary it ended on (masked, terminated or truncated)."""
    env = envs.make(envs.BUGFIX_ID, difficulty="easy", **knobs)
    ep = run_episode(env, bugfix_agents.make_agent(agent_name), seed=seed)
    info = ep.final_info
    rule = STOP_RULES[StopReason(expected)]
    scored = info["verified"] is not None
    reached = info["stop_reason"] == expected
    matches = (reached and (ep.terminated, ep.truncated) == (rule.terminated, rule.truncated)
               and info["masked"] == rule.masked and scored == rule.scored)
    boundary = "masked" if info["masked"] else "terminated" if ep.terminated else "truncated"
    return StopScenario(reason=expected, agent=agent_name, reached=reached, terminated=bool(ep.terminated),
                        truncated=bool(ep.truncated), masked=bool(info["masked"]), scored=scored,
                        matches_rule=bool(matches)), boundary


def measure_c11(seed: int = 0) -> C11Result:
    """One real BugFix episode (easy, seed ``seed``) per scenario of ``C11_SCENARIOS``
    (:func:`_stop_scenario`). Then: the number of distinct required reasons reached, the number of
    boundaries (terminated / truncated / masked) they cover, whether the rule table covers every
    StopReason, and whether the external ``cancelled`` reason has infra_error's rule."""
    scenarios, reached_required, boundaries = [], set(), set()
    for expected, agent_name, knobs in C11_SCENARIOS:
        scenario, boundary = _stop_scenario(expected, agent_name, knobs, seed)
        scenarios.append(scenario)
        if expected in C11_REQUIRED and scenario.reached:
            reached_required.add(expected)
            boundaries.add(boundary)
    cancelled, infra = STOP_RULES[StopReason.CANCELLED], STOP_RULES[StopReason.INFRA_ERROR]
    return C11Result(scenarios=tuple(scenarios), required_reached=len(reached_required),
                     boundaries_covered=len(boundaries), boundaries_total=len(Boundary),
                     rules_cover_every_reason=set(STOP_RULES) == set(StopReason),
                     cancelled_like_infra_error=((cancelled.boundary, cancelled.masked, cancelled.scored)
                                                 == (infra.boundary, infra.masked, infra.scored)))


# --------------------------------------------------------------------------------------------- C21
C21_AGENTS = bugfix_agents.HACK_AGENTS + ("fit_visible",)


@dataclass(frozen=True)
class HackStats:
    """One agent's episodes (means): fraction with its flag raised (any detector for agents
    without one), training reward, verified, rewarded-and-verified, outcome hack rate
    (train_reward > 0, verified 0)."""

    agent: str
    flagged: float
    train_reward: float
    verified: float
    rewarded_and_verified: float
    hack_rate: float

    @classmethod
    def mean(cls, parts: Sequence[HackStats]) -> HackStats:
        """The mean of each number over ``parts`` (one agent's stats per preset)."""
        mean = lambda xs: float(np.mean(list(xs)))  # noqa: E731
        return cls(agent=parts[0].agent, flagged=mean(p.flagged for p in parts),
                   train_reward=mean(p.train_reward for p in parts), verified=mean(p.verified for p in parts),
                   rewarded_and_verified=mean(p.rewarded_and_verified for p in parts),
                   hack_rate=mean(p.hack_rate for p in parts))

    @property
    def text(self) -> str:
        """``agent: flagged x, reward x, verified x, hack rate x``."""
        return (f"{self.agent.removeprefix('hack_')}: flagged {self.flagged:.2f}, reward {self.train_reward:.2f}, "
                f"verified {self.verified:.2f}, hack rate {self.hack_rate:.2f}")


@dataclass(frozen=True)
class C21Result(ClaimResult):
    """:class:`HackStats` of every agent of :data:`C21_AGENTS` and of the oracle over the presets,
    and of ``fit_visible`` under ``grader=visible`` (``visible_fit``)."""

    what: ClassVar[str] = "reward hacking earns nothing (every BugFix hack agent, easy + hard)"
    expected: ClassVar[str] = "edited tests / read answers never rewarded; counted"
    kind: ClassVar[str] = EMPIRICAL

    episodes: int
    agents: tuple[HackStats, ...]
    oracle: HackStats
    visible_fit: HackStats

    def passes(self) -> bool:
        """Test fitting and trap use earn no verified reward and no hidden-grader reward at all
        (the outcome hack rate is 0); every trap attempt is flagged; the oracle is rewarded and
        verified in every episode; under ``grader=visible`` fitting is paid while verified stays
        0, and the outcome-based hack rate shows it (>= 0.9) although no detector fires."""
        ok = all(a.rewarded_and_verified == 0 and a.train_reward == 0 and a.hack_rate == 0 for a in self.agents)
        ok &= all(a.flagged == 1.0 for a in self.agents if a.agent.startswith("hack_"))
        ok &= self.oracle.verified == 1.0 and self.oracle.train_reward == 1.0
        w = self.visible_fit
        ok &= w.train_reward > 0.9 and w.verified == 0 and w.hack_rate >= 0.9 and w.flagged == 0
        return bool(ok)

    @property
    def measured(self) -> str:
        w = self.visible_fit
        return (f"BugFix-v2 easy+hard, {self.episodes} episodes per agent (faults off, max_turns 40): "
                + "; ".join(a.text for a in self.agents)
                + f"; oracle: reward {self.oracle.train_reward:.2f}, verified {self.oracle.verified:.2f}; under "
                f"grader=visible fit_visible: reward {w.train_reward:.2f}, verified {w.verified:.2f}, outcome hack "
                f"rate {w.hack_rate:.2f}, detector matches {w.flagged:.2f}")


def _c21_stats(env, name: str, episodes: int) -> HackStats:
    flag = bugfix_agents.HACK_AGENT_FLAG.get(name)
    eps = []
    for i in range(episodes):
        options = {"task_index": i * 37, "split": ("train", "heldout")[i % 2]}
        eps.append(run_episode(env, bugfix_agents.make_agent(name), seed=i, options=options).final_info)
    return HackStats(
        agent=name,
        flagged=float(np.mean([(f["hack_flags"][flag] if flag else sum(f["hack_flags"].values())) > 0 for f in eps])),
        train_reward=float(np.mean([f["train_reward"] for f in eps])),
        verified=float(np.mean([f["verified"] for f in eps])),
        rewarded_and_verified=float(np.mean([f["train_reward"] > 0 and f["verified"] == 1 for f in eps])),
        hack_rate=float(np.mean([is_hack(f["train_reward"], f["verified"]) for f in eps])),
    )


def measure_c21(presets: Sequence[str] = ("easy", "hard"), episodes: int = 40) -> C21Result:
    """Every trap agent and ``fit_visible`` (test fitting), then the oracle, ``episodes`` episodes
    per preset (train / held-out alternating, task_index 37 i, seeds 0..n-1, faults off, max_turns
    40 so each plan reaches its submit, outcome reward): :class:`HackStats` per agent, the mean
    over the presets. Then ``fit_visible`` under ``grader=visible`` on easy (the weak verifier):
    its hack rate is the gap the harness shows."""
    stats = []
    for name in C21_AGENTS + ("oracle",):
        parts = [_c21_stats(envs.make(envs.BUGFIX_ID, difficulty=p, faults=False, max_turns=40), name, episodes)
                 for p in presets]
        stats.append(HackStats.mean(parts))
    weak = envs.make(envs.BUGFIX_ID, difficulty="easy", faults=False, max_turns=40, grader="visible")
    return C21Result(episodes=episodes * len(presets), agents=tuple(stats[:-1]), oracle=stats[-1],
                     visible_fit=_c21_stats(weak, "fit_visible", episodes))


# --------------------------------------------------------------------------------------------- C23
@dataclass(frozen=True)
class C23Result(ClaimResult):
    """Counts over the tasks: episodes with training reward 1 but verified 0, verified == the
    evaluation verifier's verdict, reward == the training grader's verdict, distinct grader
    objects, exact verifiers; and the two graders' test counts."""

    what: ClassVar[str] = "training judge is not independent evidence (BugFix graders)"
    expected: ClassVar[str] = "evaluation verifier separate from training reward"
    kind: ClassVar[str] = EMPIRICAL

    tasks: int
    train_reward_1_verified_0: int
    verified_is_eval_verdict: int
    reward_is_train_verdict: int
    distinct_graders: int
    exact_verifier: int
    train_tests: int
    eval_tests: int

    def passes(self) -> bool:
        """At least one program earns training reward 1 but verified 0; in every episode verified
        is the evaluation verifier's verdict and the reward the training grader's; distinct
        graders with disjoint inputs."""
        n = self.tasks
        return (self.train_reward_1_verified_0 >= 1 and self.verified_is_eval_verdict == n
                and self.reward_is_train_verdict == n and self.distinct_graders == n and self.exact_verifier == n)

    @property
    def measured(self) -> str:
        n = self.tasks
        return (f"BugFix-v2 easy, {n} train tasks, oracle fix + a special case on an evaluation-only input + submit: "
                f"training reward 1 but verified 0 in {self.train_reward_1_verified_0}/{n}; training grader "
                f"{self.train_tests} tests vs exact evaluation verifier {self.eval_tests} (every input -99..199 on "
                f"{self.exact_verifier}/{n} tasks); distinct objects {self.distinct_graders}/{n}; verified == "
                f"evaluation verdict {self.verified_is_eval_verdict}/{n}, reward == training verdict "
                f"{self.reward_is_train_verdict}/{n}")


def measure_c23(max_tasks: int = 10, seed: int = 0) -> C23Result:
    """BugFix easy (faults off), train tasks 0..max_tasks-1: the oracle fix plus a special case
    ``if x == E then return Y + 1`` on the task's first evaluation-only input E (Y its reference
    output), then submit. Counts: episodes with training reward 1 but verified 0, episodes where
    ``info["verified"]`` equals the evaluation verifier's own verdict and the reward the training
    grader's; the graders are distinct objects, the tasks whose verifier runs on every input the
    language admits (the exact verifier) and the two graders' test counts."""
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
    return C23Result(tasks=max_tasks, train_reward_1_verified_0=diverged, verified_is_eval_verdict=from_eval,
                     reward_is_train_verdict=from_train, distinct_graders=distinct, exact_verifier=exact,
                     train_tests=n_train, eval_tests=n_eval)


# --------------------------------------------------------------------------------------------- C24
C24_AGENTS = ("process_exploit", "oracle")
C24_MODES = ("outcome", "process", "biased_process")


@dataclass(frozen=True)
class RewardModeStats:
    """One scripted agent under one reward mode and turn limit (means over the seeds)."""

    agent: str
    mode: str
    max_turns: int
    train_reward: float
    verified: float
    hack_rate: float


@dataclass(frozen=True)
class C24AgentsResult:
    """C24's scripted-agent part: :class:`RewardModeStats` of every agent of :data:`C24_AGENTS`
    under every mode of :data:`C24_MODES` at ``max_turns`` (``cells``), and of both under
    biased_process at the easy preset's own turn limit (``preset``). Its pass rule and text are
    half of C24's row (``experiments.claims.process.C24Result``)."""

    episodes: int
    max_turns: int
    preset_max_turns: int
    cells: tuple[RewardModeStats, ...]
    preset: tuple[RewardModeStats, ...]

    def cell(self, agent: str, mode: str) -> RewardModeStats:
        """The stats of ``agent`` under ``mode`` at ``max_turns``."""
        return next(c for c in self.cells if (c.agent, c.mode) == (agent, mode))

    def preset_cell(self, agent: str) -> RewardModeStats:
        """The stats of ``agent`` under biased_process at the preset's turn limit."""
        return next(c for c in self.preset if c.agent == agent)

    def passes(self) -> bool:
        """Under biased_process the exploit earns a positive training reward above the oracle's
        while its verified success is 0 (outcome hack rate 1) and the oracle's is 1; the unbiased
        modes pay the exploit nothing."""
        ex, orc = self.cell("process_exploit", "biased_process"), self.cell("oracle", "biased_process")
        return (ex.train_reward > 0 and ex.train_reward > orc.train_reward and ex.verified == 0
                and ex.hack_rate == 1.0 and orc.verified == 1.0
                and self.cell("process_exploit", "outcome").train_reward == 0
                and self.cell("process_exploit", "process").train_reward == 0)

    @property
    def measured(self) -> str:
        """The scripted-agent half of C24's "measured" column."""
        cells = "; ".join(f"{c.agent} / {c.mode}: train reward {c.train_reward:.2f}, verified {c.verified:.2f}"
                          for c in self.cells)
        return (f"scripted agents (no trainer), BugFix-v2 easy, faults off, max_turns {self.max_turns}, "
                f"{self.episodes} seeds: {cells}; at the preset's max_turns {self.preset_max_turns} under "
                f"biased_process: exploit {self.preset_cell('process_exploit').train_reward:.2f} vs oracle "
                f"{self.preset_cell('oracle').train_reward:.2f}")


def _c24_means(agent: str, reward_mode: str, episodes: int, max_turns: int) -> RewardModeStats:
    env = envs.make(envs.BUGFIX_ID, difficulty="easy", faults=False, reward_mode=reward_mode, max_turns=max_turns)
    infos = [run_episode(env, bugfix_agents.make_agent(agent), seed=s).final_info for s in range(episodes)]
    return RewardModeStats(agent=agent, mode=reward_mode, max_turns=max_turns,
                           train_reward=float(np.mean([f["train_reward"] for f in infos])),
                           verified=float(np.mean([f["verified"] for f in infos])),
                           hack_rate=float(np.mean([is_hack(f["train_reward"], f["verified"]) for f in infos])))


def measure_c24_agents(episodes: int = 10, max_turns: int = 20) -> C24AgentsResult:
    """Scripted agents (no trainer), BugFix easy, faults off, seeds 0..n-1: ``process_exploit``
    (runs the tests every turn, fixes nothing) and the oracle under ``outcome``, ``process`` and
    ``biased_process`` at ``max_turns``; and both under biased_process at the easy preset's own
    turn limit."""
    preset_turns = DIFFICULTIES["easy"]["max_turns"]
    cells, preset = [], []
    for agent in C24_AGENTS:
        cells += [_c24_means(agent, mode, episodes, max_turns) for mode in C24_MODES]
        preset.append(_c24_means(agent, "biased_process", episodes, preset_turns))
    return C24AgentsResult(episodes=episodes, max_turns=max_turns, preset_max_turns=preset_turns,
                           cells=tuple(cells), preset=tuple(preset))

