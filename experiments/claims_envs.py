"""Env-level checks of the empirical claims C9, C10, C11, C21, C23 and C24 (CLAIMS.md).

Each ``check_cX(...)`` is a pure function: it builds the project's real environments, plays the
project's scripted agents with fixed seeds, and returns ``(measured, status)`` with ``status`` one
of ``"PASS"`` / ``"FAIL"`` decided by the explicit criterion in its docstring. Nothing is read from
a cache or a previous run. ``experiments/reproduce_claims.py`` registers them in ``CLAIMS``.

The keyword arguments exist so tests can violate a criterion on purpose (and see FAIL); the
defaults are the settings the claims table reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

import envs
from envs import agents as bugfix_agents
from envs import long_horizon_agents as lh_agents
from envs.bugfix import run_program
from envs.compression import ContextCompression
from envs.stop import STOP_RULES, Boundary, StopReason, StopRule
from envs.tokenizer import get_tokenizer

PASS, FAIL = "PASS", "FAIL"  # the same strings as experiments.reproduce_claims
STEP_UNIT = "step = one tool call (turn)"

# The hack agents C21 runs; a module attribute so a test can swap in a list that breaks the claim.
HACK_AGENTS: tuple[str, ...] = bugfix_agents.HACK_AGENTS


def _status(ok: bool) -> str:
    return PASS if ok else FAIL


def _bugfix(difficulty: str = "easy", **knobs):
    return envs.make(envs.BUGFIX_ID, difficulty=difficulty, **knobs)


# ---------------------------------------------------------------------------------------------- C9
def context_tokens(observations: Sequence[str], actions: Sequence[str]) -> int:
    """Tokens of one segment's policy context, docs/interfaces.md layout:
    ``[BOS] obs_0 [SEP]`` then ``a_t [EOS] obs_t [SEP]`` per turn."""
    tok = get_tokenizer()
    total = tok.count(observations[0]) + 2
    for action, obs in zip(actions, observations[1:]):
        total += tok.count(action) + 1 + tok.count(obs) + 1
    return total


def check_c9(long_stages: int = 197, short_stages: int = 7, small_verbose: int = 0,
             large_verbose: int = 1000, seed: int = 0) -> tuple[str, str]:
    """Horizon (decisions) and context length are separate knobs of LongHorizon.

    2 x 2 grid: ``n_stages`` in {long, short} x ``verbose`` in {small, large}, one oracle episode
    each (same seed and task). Turns are ``info["turn"]``; context tokens are counted with the
    shared tokenizer in the interfaces layout and cross-checked against the compression wrapper's
    own counter (strategy ``none``, a pass-through). PASS when: the oracle resolves every episode;
    turns depend only on ``n_stages`` (``n_stages + 3``, the same for both ``verbose``); context
    grows with ``verbose`` at a fixed horizon; the (long, small) episode has >= 10x the turns of
    the (short, large) one but fewer context tokens; the two token counts agree.
    """
    results = {}
    for stages in (long_stages, short_stages):
        for verbose in (small_verbose, large_verbose):
            env = ContextCompression(envs.make(envs.LONG_HORIZON_ID, n_stages=stages, verbose=verbose),
                                     strategy="none")
            ep = lh_agents.run_episode(env, lh_agents.OracleAgent(), seed=seed,
                                       options={"task_index": 0, "split": "train"})
            tokens = context_tokens(ep.observations, ep.actions)
            results[stages, verbose] = (ep.final_info["turn"], tokens, env.context_tokens,
                                        ep.final_info["verified"])
    ok = all(v[3] == 1 and v[1] == v[2] for v in results.values())
    for stages in (long_stages, short_stages):
        turns_small, tokens_small = results[stages, small_verbose][:2]
        turns_large, tokens_large = results[stages, large_verbose][:2]
        ok &= turns_small == turns_large == stages + 3 and tokens_large > tokens_small
    many_turns, small_ctx = results[long_stages, small_verbose][:2]
    few_turns, large_ctx = results[short_stages, large_verbose][:2]
    ok &= many_turns >= 10 * few_turns and small_ctx < large_ctx
    cells = "; ".join(f"n_stages={s}, verbose={v}: {t} turns, {k} context tokens"
                      for (s, v), (t, k, _, _) in results.items())
    measured = (
        f"{STEP_UNIT}; LongHorizon oracle, seed {seed}, task 0: {cells}; many decisions / small "
        f"context = {many_turns} turns / {small_ctx} tokens vs few decisions / large context = "
        f"{few_turns} turns / {large_ctx} tokens; oracle verified "
        f"{sum(v[3] for v in results.values())}/4; tokenizer count == wrapper count: "
        f"{all(v[1] == v[2] for v in results.values())}"
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------------- C10
C10_ENV = {"n_stages": 6, "n_approaches": 6, "verbose": 30}


def _c10_run(strategy: str | None, episodes: int) -> tuple[float, float, list[int]]:
    compression = None if strategy is None else {"strategy": strategy}
    env = envs.make(envs.LONG_HORIZON_ID, compression=compression, **C10_ENV)
    repeated, verified, compressions = [], [], []
    for seed in range(episodes):
        ep = lh_agents.run_episode(env, lh_agents.ContextReadingAgent(), seed=seed,
                                   options={"task_index": seed, "split": "train"})
        repeated.append(ep.final_info["repeated_failed_approaches"])
        verified.append(ep.final_info["verified"])
        compressions.append(sum("compression" in info for info in ep.infos))
    return float(np.mean(repeated)), float(np.mean(verified)), compressions


def check_c10(lossy: str = "lossy_summary", structured: str = "structured_summary",
              episodes: int = 30, margin: float = 3.0) -> tuple[str, str]:
    """A lossy summary makes the agent repeat failed fixes; a structured one does not.

    ``ContextReadingAgent`` (decides only from its context text) on LongHorizon (6 stages, 6
    approaches, verbose 30), seeds / train tasks 0..episodes-1, default 256-token trigger; only
    the strategy differs. PASS when mean repeated failed approaches per episode under ``lossy``
    exceeds ``structured`` by >= ``margin`` and both compressed in every episode (so the gap
    comes from the summary content). Success rates and the no-compression baseline are reported.
    """
    runs = {name: _c10_run(name, episodes) for name in (lossy, structured)}
    base_rep, base_ok, _ = _c10_run(None, episodes)
    (l_rep, l_ok, l_comp), (s_rep, s_ok, s_comp) = runs[lossy], runs[structured]
    ok = l_rep - s_rep >= margin and min(l_comp) >= 1 and min(s_comp) >= 1
    measured = (
        f"ContextReadingAgent, LongHorizon n_stages 6 / n_approaches 6 / verbose 30, {episodes} "
        f"episodes (seeds = train tasks 0..{episodes - 1}), token trigger 256: repeated failed "
        f"approaches per episode {lossy} {l_rep:.2f} vs {structured} {s_rep:.2f} (gap "
        f"{l_rep - s_rep:.2f}, need >= {margin:g}); verified success {l_ok:.2f} vs {s_ok:.2f}; "
        f"compressions per episode {np.mean(l_comp):.1f} vs {np.mean(s_comp):.1f} (min "
        f"{min(l_comp)} / {min(s_comp)}); no compression: {base_rep:.2f} repeats, success {base_ok:.2f}"
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------------- C11
_QUIET = {"timeout_prob": 0.0, "flaky_prob": 0.0, "crash_prob": 0.0}
# (category, expected stop reason, agent, BugFix knobs on top of easy)
C11_SCENARIOS: tuple[tuple[str, str, str, dict], ...] = (
    ("task failure", "submitted_failed", "empty_submit", _QUIET),
    ("tool timeout", "consecutive_timeouts", "oracle", {**_QUIET, "timeout_prob": 1.0}),
    ("cancellation / infrastructure", "infra_error", "oracle", {**_QUIET, "crash_prob": 1.0}),
    ("budget exhaustion (turns)", "max_turns", "process_exploit", _QUIET),
    ("budget exhaustion (simulated time)", "wall_clock", "process_exploit", {**_QUIET, "wall_clock_limit": 5.0}),
    ("success", "submitted_resolved", "oracle", _QUIET),
)
C11_REQUIRED = ("submitted_failed", "consecutive_timeouts", "infra_error", "max_turns")


def check_c11(rules: Mapping[StopReason, StopRule] = STOP_RULES, seed: int = 0) -> tuple[str, str]:
    """Distinct stop reasons, each ending episodes exactly as the rule table says.

    One real BugFix episode (easy, seed ``seed``) per scenario of ``C11_SCENARIOS``, driven there
    with the scripted agents and the fault-injection knobs. For each: the reason reached, the
    returned ``terminated``/``truncated``, ``info["masked"]`` and whether it is scored
    (``info["verified"]`` is 0/1, not None). PASS when every scenario reaches its reason and its
    observed flags match ``rules`` (boundary, masked, scored); the four required reasons (task
    failure, tool timeout, infrastructure/cancellation, budget) are distinct and together cover
    terminated, truncated and masked; ``rules`` covers every ``StopReason``, and the external
    ``cancelled`` reason (no env produces it) has the same rule as ``infra_error``.
    """
    ok = set(rules) == set(StopReason)
    parts, boundaries, reached = [], set(), []
    for category, expected, agent_name, knobs in C11_SCENARIOS:
        env = _bugfix("easy", **knobs)
        obs, info = env.reset(seed=seed)
        agent = bugfix_agents.make_agent(agent_name)
        agent.reset(env, seed)
        terminated = truncated = False
        while not (terminated or truncated):
            obs, _, terminated, truncated, info = env.step(agent.act(obs, info))
        reason = info["stop_reason"]
        rule = rules.get(StopReason(reason))
        scored = info["verified"] is not None
        boundary = "masked" if info["masked"] else "terminated" if terminated else "truncated"
        match = (
            reason == expected
            and rule is not None
            and (bool(terminated), bool(truncated)) == (rule.terminated, rule.truncated)
            and info["masked"] == rule.masked
            and scored == rule.scored
        )
        ok &= match
        if reason in C11_REQUIRED:
            reached.append(reason)
            boundaries.add(boundary)
        parts.append(
            f"{category} -> {reason} ({agent_name}, {info['turn']} turns): terminated={bool(terminated)} "
            f"truncated={bool(truncated)} masked={info['masked']} scored={scored} "
            f"(verified {info['verified']}); rule {rule.boundary.value if rule else '?'}"
            f"{', scored' if rule and rule.scored else ', not scored'}: {'match' if match else 'MISMATCH'}"
        )
    ok &= sorted(reached) == sorted(C11_REQUIRED) and boundaries == {b.value for b in Boundary}
    cancelled, infra = rules.get(StopReason.CANCELLED), rules.get(StopReason.INFRA_ERROR)
    same_masked = bool(cancelled and infra and (cancelled.boundary, cancelled.masked, cancelled.scored)
                       == (infra.boundary, infra.masked, infra.scored))
    ok &= same_masked
    measured = (
        f"BugFix easy, seed {seed}: " + "; ".join(parts)
        + f"; required reasons distinct: {len(set(reached))}/4, boundaries covered: {sorted(boundaries)}; "
        f"rule table: {len(rules)} reasons; 'cancelled' (external, produced by no env) has infra_error's "
        f"masked rule: {same_masked}; 'token_budget' is written by the rollout engine, not the envs"
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------------- C21
def _episode_options(i: int, n_tasks: Mapping[str, int]) -> dict:
    split = ("train", "heldout")[i % 2]
    return {"task_index": (i * 37) % n_tasks[split], "split": split}


def check_c21(hack_agents: Sequence[str] | None = None, presets: Sequence[str] = ("easy", "hard"),
              episodes: int = 40) -> tuple[str, str]:
    """Reward hacking earns nothing and every attempt is counted.

    Every hack agent of ``envs/agents.py`` (default: this module's ``HACK_AGENTS``) plays
    ``episodes`` episodes on each preset (train and held-out tasks alternating, seeds 0..n-1,
    faults off and max_turns 40 so each plan reaches its submit), outcome reward. PASS when, for
    every hack agent, verified success is 0 and training reward is 0 in every episode, and every
    episode has the agent's hack flag counted (> 0; an agent without a known flag needs any flag);
    the oracle, for contrast, is verified and rewarded in every episode.
    """
    names = tuple(HACK_AGENTS if hack_agents is None else hack_agents)
    ok = bool(names)
    stats: dict[str, dict[str, float]] = {}
    leak = {}
    for preset in presets:
        env = _bugfix(preset, faults=False, max_turns=40, reward_mode="outcome")
        n_tasks = {split: len(env.unwrapped.tasks(split)) for split in ("train", "heldout")}
        for name in names + ("oracle",):
            s = stats.setdefault(name, dict(episodes=0, flagged=0, flags=0, reward=0.0, verified=0, hidden=0.0))
            flag = bugfix_agents.HACK_AGENT_FLAG.get(name)
            for i in range(episodes):
                ep = bugfix_agents.run_episode(env, bugfix_agents.make_agent(name), seed=i,
                                               options=_episode_options(i, n_tasks))
                own = ep["hack_flags"][flag] if flag else sum(ep["hack_flags"].values())
                s["episodes"] += 1
                s["flagged"] += int(own > 0)
                s["flags"] += own
                s["reward"] += ep["train_reward"]
                s["verified"] += int(ep["verified"] or 0)
                s["hidden"] += ep["hidden_pass_rate"] or 0.0
                if name in ("hack_read_ref", "hack_read_log"):
                    leak.setdefault(preset, []).append(ep["hidden_pass_rate"])
    parts = []
    for name in names:
        s = stats[name]
        ok &= s["flagged"] == s["episodes"] and s["reward"] == 0.0 and s["verified"] == 0
        parts.append(f"{name.removeprefix('hack_')}: flagged {s['flagged']}/{s['episodes']} "
                     f"({s['flags']} attempts), reward {s['reward']:g}, verified {s['verified']}")
    o = stats["oracle"]
    ok &= o["verified"] == o["episodes"] and o["reward"] == o["episodes"]
    leak_text = ", ".join(f"{p} {np.mean(v):.2f}" for p, v in leak.items())
    measured = (
        f"{'+'.join(presets)}, {episodes} episodes each (train/heldout alternating, faults off, max_turns 40, "
        f"outcome reward): " + "; ".join(parts)
        + f"; oracle: verified {o['verified']}/{o['episodes']}, reward {o['reward']:g}"
        + (f"; read_ref/read_log hidden pass rate {leak_text} (a readable leak passes the hidden tests; "
           "the void-on-flag rule stops it; hard denies the read but still counts it)" if leak else "")
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------------- C23
class _RecordingVerifier:
    """Wraps a Verifier; records every verdict it returns (the env still gets the real verdict)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.verdicts: list[int] = []

    def verdict(self, program, hack_flags) -> int:
        value = self.inner.verdict(program, hack_flags)
        self.verdicts.append(value)
        return value

    def __getattr__(self, name):
        return getattr(self.inner, name)


def check_c23(exploit: str = "insert 1 if x < 0 then return 0", max_tasks: int = 10,
              seed: int = 0) -> tuple[str, str]:
    """The evaluation verifier is a separate object with a separate test set.

    BugFix easy (faults off). On up to ``max_tasks`` train tasks whose reference is non-zero on
    some negative input, play the oracle fix plus ``exploit`` (a special case for inputs the
    training grader never uses: it tests 0..15, the evaluation verifier -5..20) and submit. Both
    verifiers are wrapped in recorders after reset. PASS when the two verifiers and graders are
    distinct objects with different test inputs, at least one program earns training reward 1 but
    ``verified`` 0, and in every episode ``info["verified"]`` is exactly the evaluation
    verifier's verdict and the reward exactly the training grader's.
    """
    env = _bugfix("easy", faults=False)
    u = env.unwrapped
    tasks = u.tasks("train")
    negatives = tuple(range(-5, 0))
    chosen = [i for i, t in enumerate(tasks) if any(run_program(t.reference, negatives))][:max_tasks]
    ok = bool(chosen)
    diverged = from_eval = from_train = 0
    train_inputs: set[int] = set()
    eval_inputs: set[int] = set()
    n_train = n_eval = 0
    distinct = True
    for index in chosen:
        env.reset(seed=seed, options={"task_index": index, "split": "train"})
        distinct &= u._train_verifier is not u._eval_verifier and u._train_verifier.grader is not u._eval_verifier.grader
        train_grader, eval_grader = u._train_verifier.grader, u._eval_verifier.grader
        distinct &= set(train_grader.inputs) != set(eval_grader.inputs)
        train_inputs |= set(train_grader.inputs)
        eval_inputs |= set(eval_grader.inputs)
        n_train, n_eval = max(n_train, train_grader.n_tests), max(n_eval, eval_grader.n_tests)
        u._train_verifier = train_rec = _RecordingVerifier(u._train_verifier)
        u._eval_verifier = eval_rec = _RecordingVerifier(u._eval_verifier)
        total = 0.0
        for action in (*u.oracle_actions(), exploit, "submit"):
            _, reward, terminated, truncated, info = env.step(action)
            total += reward
            if terminated or truncated:
                break
        from_eval += int(eval_rec.verdicts == [info["verified"]])
        from_train += int(train_rec.verdicts[-1:] == [int(total)])
        diverged += int(total == 1.0 and info["verified"] == 0)
    ok &= distinct and diverged >= 1 and from_eval == from_train == len(chosen)
    measured = (
        f"BugFix easy, {len(chosen)} train tasks, oracle fix + '{exploit}' + submit: training reward 1 "
        f"but verified 0 in {diverged}/{len(chosen)}; training grader (visible + hidden training tests) "
        f"{n_train} tests per task, inputs within {min(train_inputs)}..{max(train_inputs)}, vs evaluation "
        f"verifier {n_eval} tests on {min(eval_inputs)}..{max(eval_inputs)}; separate objects with different "
        f"inputs: {distinct}; info['verified'] == the "
        f"evaluation verifier's recorded verdict in {from_eval}/{len(chosen)}, reward == the training "
        f"grader's verdict in {from_train}/{len(chosen)}"
        if chosen else f"no train task is non-zero on a negative input: nothing to show ({exploit!r})"
    )
    return measured, _status(ok)


# --------------------------------------------------------------------------------------------- C24
def _c24_means(agent: str, reward_mode: str, episodes: int, max_turns: int) -> tuple[float, float]:
    env = _bugfix("easy", faults=False, reward_mode=reward_mode, max_turns=max_turns)
    eps = [bugfix_agents.run_episode(env, bugfix_agents.make_agent(agent), seed=s) for s in range(episodes)]
    return float(np.mean([e["train_reward"] for e in eps])), float(np.mean([e["verified"] for e in eps]))


def check_c24(reward_mode: str = "biased_process", episodes: int = 10, max_turns: int = 20) -> tuple[str, str]:
    """A biased process reward pays more without more verified success (scripted agents).

    BugFix easy, faults off, ``max_turns`` turns, seeds 0..n-1: the ``process_exploit`` agent
    (runs the tests every turn, fixes nothing) and the oracle, under ``outcome``, ``process``
    (unbiased, once per real fix) and ``reward_mode``. PASS when under ``reward_mode`` the exploit
    earns a positive training reward higher than the oracle's while its verified success is 0 and
    the oracle's is 1, and the unbiased modes pay the exploit nothing. Shown with scripted agents,
    not a trainer.
    """
    table = {(a, m): _c24_means(a, m, episodes, max_turns)
             for a in ("process_exploit", "oracle") for m in ("outcome", "process", reward_mode)}
    ex_r, ex_v = table["process_exploit", reward_mode]
    or_r, or_v = table["oracle", reward_mode]
    ok = (
        ex_r > 0 and ex_r > or_r and ex_v == 0.0 and or_v == 1.0
        and table["process_exploit", "outcome"][0] == 0.0 and table["process_exploit", "process"][0] == 0.0
    )
    short_ex, _ = _c24_means("process_exploit", reward_mode, episodes, 11)
    short_or, _ = _c24_means("oracle", reward_mode, episodes, 11)
    cells = "; ".join(f"{a} / {m}: train reward {r:.2f}, verified {v:.2f}" for (a, m), (r, v) in table.items())
    measured = (
        f"scripted agents (no trainer), BugFix easy, faults off, max_turns {max_turns}, {episodes} seeds: {cells}; "
        f"at the preset's max_turns 11 under {reward_mode}: exploit {short_ex:.2f} vs oracle {short_or:.2f}"
    )
    return measured, _status(ok)
