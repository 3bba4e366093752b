"""LongHorizon-v3: Gymnasium API, determinism, the split, the horizon knob, credit over the
horizon, compression through structured_summary, constructor validation, scripted agents."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envs
from envs.episode import run_episode
from envs.long_horizon_v3 import FIX_NAMES, INPUTS, LongHorizonV3Env, make_task, table_parity
from envs.long_horizon_v3_agents import (
    ContextReadingAgent,
    NoisyOracleAgent,
    OracleAgent,
    make_agent,
)
from envs.tokenizer import get_tokenizer

ID = envs.LONG_HORIZON_V3_ID
TOK = get_tokenizer()
HORIZONS = (8, 32, 128)
SUMMARY = {"strategy": "structured_summary", "max_compactions": 32}


def make(**kwargs) -> LongHorizonV3Env:
    return gym.make(ID, **kwargs).unwrapped


def oracle_actions(env: LongHorizonV3Env) -> list[str]:
    task = env.task
    return ["read notes"] + [f"fix {task.stages[k]} {task.answer(k)}" for k in range(env.n_stages)] + ["submit"]


def play(env, actions):
    """Step ``actions``; the list of (obs, reward, terminated, truncated, info)."""
    return [env.step(a) for a in actions]


def test_registered_beside_v1_and_check_env_passes_without_warnings():
    assert envs.LONG_HORIZON_ID in gym.registry and ID in gym.registry
    env = gym.make(ID)
    assert isinstance(env.unwrapped, LongHorizonV3Env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped)
    for kwargs in ({"n_stages": 2, "n_rules": 2}, {"n_stages": 250, "n_rules": 8, "verbose": 25},
                   {"time_limit": "termination"}):
        check_env(make(**kwargs))


def test_reset_observation_is_statement_and_first_stage_hand_counted():
    env = make()
    obs, info = env.reset(seed=0, options={"task_index": 0})
    lines = obs.split("\n")
    assert "\n".join(lines[:3]) == env.task_statement()
    assert lines[3] == f"stage 1 : fails on {env.task.stages[0]} ."
    # 29 + 13 + 14 + 7 words ("task : fix a stage ... : fix input X . finish 8 stages , then submit .",
    # "read the notes first ... fix .", the actions line "actions : ... | fix input X | ...",
    # "stage 1 : fails on <input> .") + 3 line breaks = 66 tokens
    assert [len(line.split()) for line in lines] == [29, 13, 14, 7]
    assert TOK.count(obs) == 66
    assert info["turn"] == 0 and info["stages_left"] == 8 and info["wrong_fixes"] == 0


def test_observations_are_short_and_hand_counted():
    env = make(n_stages=8)
    env.reset(seed=0, options={"task_index": 5})
    task = env.task
    obs, *_ = env.step("read notes")
    # "notes : a A , b B , c C , d D ." = 2 + 4 * 2 + 3 commas + 1 = 14 words, a line break, then
    # the 7-word stage line
    assert obs == f"notes : {task.notes()} .\nstage 1 : fails on {task.stages[0]} ."
    assert TOK.count(obs) == 14 + 1 + 7
    obs, *_ = env.step(f"fix {task.stages[0]} {task.answer(0)}")
    assert obs == f"stage 2 : fails on {task.stages[1]} ." and TOK.count(obs) == 7
    assert env.step("status")[0] == f"status : 7 stages left , stage 2 : fails on {task.stages[1]} ."
    verbose = make(n_stages=8, verbose=25)
    verbose.reset(seed=0, options={"task_index": 5})
    obs, *_ = verbose.step(f"fix {verbose.task.stages[0]} A")
    # stage line + 25 filler words in lines of 10, 10, 5: 7 + 25 + 3 line breaks = 35 tokens
    assert TOK.count(obs) == 35
    assert not any(w.lstrip("-").isdigit() for w in obs.split("\n", 1)[1].split())


@pytest.mark.parametrize("agent", ["oracle", "noisy_oracle", "random", "program_blind", "forgetful"])
@pytest.mark.parametrize("compression", [None, SUMMARY])
def test_every_observation_encodes_without_unknown_words(agent, compression):
    env = envs.make(ID, compression=compression, n_stages=32, verbose=12)
    for i in range(6):
        ep = run_episode(env, make_agent(agent), seed=i, options={"task_index": i, "split": ("train", "heldout")[i % 2]})
        for text in [*ep.observations, *ep.actions]:
            TOK.encode(text)  # ValueError on a word outside the vocabulary


def test_same_seed_same_episode():
    def episode(seed):
        env = make(n_stages=16, verbose=12)
        ep = run_episode(env, make_agent("random"), seed=seed)
        return ep.observations, ep.actions, ep.rewards, [dict(i) for i in ep.infos]

    assert episode(7) == episode(7)
    assert episode(7) != episode(8)


def test_task_is_a_function_of_split_index_and_rules_and_its_table_of_no_horizon():
    a, b = make_task("train", 3, 4, 8), make_task("train", 3, 4, 128)
    assert a.table == b.table and a.order == b.order
    assert make_task("train", 3, 4, 32) == make_task("train", 3, 4, 32)
    assert make_task("heldout", 3, 4, 32).table != a.table
    for n in HORIZONS:
        t = make_task("heldout", 11, 4, n)
        assert len(t.stages) == n and set(t.stages) == set(t.table)  # every rule is needed


def test_table_parity_counts_inversions():
    # inputs in INPUTS order boundary, empty, load: approaches C, A, B -> inversions (C,A), (C,B) = 2
    assert table_parity({"load": "B", "boundary": "C", "empty": "A"}) == 0
    assert table_parity({"load": "A", "boundary": "C", "empty": "B"}) == 1  # (C,B), (C,A), (B,A) = 3


def test_heldout_split_is_disjoint_by_behaviour_from_train():
    train = {tuple(sorted(make_task("train", i, 4, 8).table.items())) for i in range(5000)}
    heldout = [make_task("heldout", i, 4, 8) for i in range(1000)]
    assert all(table_parity(t.table) == 1 for t in heldout)
    assert not train & {tuple(sorted(t.table.items())) for t in heldout}
    # a train task on the same inputs gives some input a different approach, and every input of a
    # task is met at some stage: the oracle's actions differ on an equal observation
    by_inputs = {}
    for table in train:
        by_inputs.setdefault(tuple(i for i, _ in table), []).append(dict(table))
    for t in heldout:
        for other in by_inputs.get(tuple(sorted(t.table)), []):
            assert any(other[i] != t.table[i] for i in t.table)


def test_heldout_answers_and_words_all_appear_in_train_episodes():
    def words(split, n_tasks):
        seen, answers = set(), set()
        env = make(n_stages=32)
        for i in range(n_tasks):
            ep = run_episode(env, OracleAgent(), seed=i, options={"task_index": i, "split": split})
            for text in [*ep.observations, *ep.actions]:
                seen.update(TOK.words(text))
            answers.update(a for a in ep.actions if a.startswith("fix"))
        return seen, answers

    train_words, train_answers = words("train", 200)
    heldout_words, heldout_answers = words("heldout", 100)
    assert heldout_answers <= train_answers == {f"fix {i} {a}" for i in INPUTS[:4] for a in FIX_NAMES}
    assert heldout_words <= train_words
    # every single rule (input -> approach) of the held-out split occurs in train tables
    pairs = lambda split, n: {p for i in range(n) for p in make_task(split, i, 4, 8).table.items()}
    assert pairs("heldout", 500) == pairs("train", 500) == set(itertools.product(INPUTS[:4], FIX_NAMES))


@pytest.mark.parametrize("n_stages", HORIZONS)
def test_oracle_solves_every_task_within_the_turn_limit(n_stages):
    env = make(n_stages=n_stages)
    for split, i in itertools.product(("train", "heldout"), range(40)):
        ep = run_episode(env, OracleAgent(), seed=i, options={"task_index": i, "split": split})
        final = ep.infos[-1]
        assert final["verified"] == 1 and final["stop_reason"] == "submitted_resolved"
        assert final["turn"] == n_stages + 2 <= env.max_turns == n_stages + 6


@pytest.mark.parametrize("where", ["early", "middle", "late"])
def test_one_wrong_fix_at_any_stage_fails_the_episode_silently(where):
    n = 32
    stage = {"early": 0, "middle": n // 2, "late": n - 1}[where]
    right, wrong = make(n_stages=n), make(n_stages=n)
    right.reset(seed=3, options={"task_index": 9})
    wrong.reset(seed=3, options={"task_index": 9})
    actions = oracle_actions(right)
    other = next(a for a in sorted(set(right.task.table.values())) if a != right.task.answer(stage))
    bad = list(actions)
    bad[1 + stage] = f"fix {right.task.stages[stage]} {other}"
    good_steps, bad_steps = play(right, actions), play(wrong, bad)
    # the wrong fix is silent: the same observations up to the submit verdict
    assert [s[0] for s in good_steps[:-1]] == [s[0] for s in bad_steps[:-1]]
    assert (good_steps[-1][0], good_steps[-1][1], good_steps[-1][4]["verified"]) == ("submitted : resolved .", 1.0, 1)
    assert (bad_steps[-1][0], bad_steps[-1][1], bad_steps[-1][4]["verified"]) == ("submitted : failed .", 0.0, 0)
    assert bad_steps[-1][4]["stop_reason"] == "submitted_failed"
    assert bad_steps[-1][4]["first_wrong_stage"] == stage + 1 and bad_steps[-1][4]["wrong_fixes"] == 1
    # the anchor state records the broken run from that stage on
    assert good_steps[stage][4]["state_key"] == bad_steps[stage][4]["state_key"]
    assert good_steps[stage + 1][4]["state_key"] != bad_steps[stage + 1][4]["state_key"]


def test_submit_early_fails_and_the_notes_are_archived_after_the_first_fix():
    env = make(n_stages=8)
    env.reset(seed=0, options={"task_index": 1})
    obs, r, term, trunc, info = env.step(f"fix {env.task.stages[0]} {env.task.answer(0)}")
    assert info["stages_left"] == 7
    obs, _, _, _, info = env.step("read notes")
    assert (obs, info["tool_status"]) == ("error: the notes are archived after the first fix .", "error")
    assert env.memory_facts().pending == "notes are archived"
    obs, r, term, trunc, info = env.step("submit")
    assert (obs, r, term, trunc, info["stop_reason"], info["verified"]) == (
        "submitted : failed .", 0.0, True, False, "submitted_failed", 0)


def test_fix_naming_another_input_than_the_stages_is_an_error_without_state_change():
    env = make(n_stages=8)
    env.reset(seed=0, options={"task_index": 2})
    failing = env.task.stages[0]
    other = next(i for i in INPUTS[:4] if i != failing)
    key = env.state_key()
    obs, r, term, trunc, info = env.step(f"fix {other} {env.task.answer(0)}")
    assert (obs, info["tool_status"], info["stages_left"], info["turn"]) == (
        f"error: stage 1 : fails on {failing} .", "error", 8, 1)
    assert info["state_key"] == key and (r, term, trunc) == (0.0, False, False)
    # the right input with the table's approach then fixes the stage
    assert env.step(f"fix {failing} {env.task.answer(0)}")[4]["stages_left"] == 7


def test_format_errors_cost_a_turn_and_three_in_a_row_end_the_episode():
    env = make()
    env.reset(seed=0)
    for k, action in enumerate(["fix", "fix Z", "submit now"]):
        obs, r, term, trunc, info = env.step(action)
        assert info["tool_status"] == "format_error" and info["stages_left"] == 8
    assert term and info["stop_reason"] == "format_errors" and info["verified"] == 0
    env.reset(seed=0)
    assert env.step("fix A\tB")[0].startswith("error: malformed action : whitespace")


def test_memory_facts_carry_the_table_once_read():
    env = make(n_stages=8)
    env.reset(seed=0, options={"task_index": 2})
    assert env.memory_facts().pending == "read notes"
    env.step("read notes")
    facts = env.memory_facts()
    assert facts.pending == f"notes : {env.task.notes()} ."
    assert facts.code_state == "8 stages left , then submit" and facts.tried == ()


def test_compression_fires_many_times_at_128_and_the_context_reader_succeeds_through_it():
    env = envs.make(ID, compression=SUMMARY, n_stages=128)
    for i in range(10):
        ep = run_episode(env, ContextReadingAgent(), seed=i, options={"task_index": i, "split": "heldout"})
        records = [x["compression"] for x in ep.infos if "compression" in x]
        # 130 turns of ~9 tokens, a segment compressed at > 0.8 * 256 tokens into ~110: >= 10 segments
        assert len(records) >= 10
        assert max(r["tokens_before"] for r in records) <= 256 and env.context_tokens <= 256
        assert ep.infos[-1]["verified"] == 1
        summary = ep.observations[[k for k, x in enumerate(ep.infos) if "compression" in x][-1]]
        assert f"pending : notes : {env.unwrapped.task.notes()} ." in summary.split("\n")


def test_compression_strategies_that_drop_the_table_fail_the_context_reader():
    for strategy in ("lossy_summary", "recent"):
        env = envs.make(ID, compression={"strategy": strategy, "max_compactions": 32}, n_stages=32)
        wins = [run_episode(env, ContextReadingAgent(), seed=i, options={"task_index": i}).infos[-1]["verified"]
                for i in range(20)]
        assert sum(wins) <= 2


@pytest.mark.parametrize("kwargs,message", [
    ({"n_stages": 3}, "n_stages=3 out of range; allowed: an int in 4..1000 (at least n_rules=4)"),
    ({"n_stages": 1001}, "n_stages=1001 out of range; allowed: an int in 4..1000 (at least n_rules=4)"),
    ({"n_stages": 8.0}, "n_stages=8.0 out of range; allowed: an int in 4..1000 (at least n_rules=4)"),
    ({"n_rules": 1}, "n_rules=1 out of range; allowed: an int in 2..8"),
    ({"n_rules": 9}, "n_rules=9 out of range; allowed: an int in 2..8"),
    ({"verbose": -1}, "verbose=-1 out of range; allowed: an int in 0..10000"),
    ({"max_turns": 0}, "max_turns=0 out of range; allowed: an int in 1..100000"),
    ({"max_format_errors": True}, "max_format_errors=True out of range; allowed: an int in 1..1000"),
    ({"time_limit": "never"}, "time_limit='never' unknown; allowed: truncation, termination"),
    ({"render_mode": "human"}, "render_mode='human' unknown; allowed: None, ansi"),
    ({"check_prob": 1.5}, "check_prob=1.5 out of range; allowed: a number in [0, 1]"),
])
def test_each_constructor_knob_bad_value_is_a_one_line_value_error(kwargs, message):
    with pytest.raises(ValueError) as e:
        LongHorizonV3Env(**kwargs)
    assert str(e.value) == message and "\n" not in str(e.value)


@pytest.mark.parametrize("n_stages", [8, 128])
def test_noisy_oracle_success_is_one_minus_the_mistake_rate_at_every_horizon(n_stages):
    env = make(n_stages=n_stages)
    eps = [run_episode(env, NoisyOracleAgent(mistake_rate=0.5), seed=i, options={"task_index": i})
           for i in range(300)]
    wins = np.array([ep.infos[-1]["verified"] for ep in eps])
    assert abs(wins.mean() - 0.5) < 0.1  # binomial sd 0.029
    assert all(ep.infos[-1]["wrong_fixes"] == 1 - w for ep, w in zip(eps, wins))
    firsts = [ep.infos[-1]["first_wrong_stage"] for ep in eps if ep.infos[-1]["wrong_fixes"]]
    assert min(firsts) <= n_stages // 4 and max(firsts) > 3 * n_stages // 4  # early and late mistakes


@pytest.mark.parametrize("n_stages", HORIZONS)
def test_floor_agents_stay_far_below_the_oracle(n_stages):
    env = make(n_stages=n_stages)
    for name in ("random", "program_blind", "forgetful"):
        wins = sum(run_episode(env, make_agent(name), seed=i, options={"task_index": i, "split": "heldout"})
                   .infos[-1]["verified"] for i in range(100))
        assert wins <= 3, name


def test_program_blind_success_on_a_two_rule_table_is_one_in_fifty_six():
    # it guesses distinct approaches for the two inputs: right with probability 1/8 * 1/7
    env = make(n_stages=2, n_rules=2)
    wins = sum(run_episode(env, make_agent("program_blind"), seed=i, options={"task_index": i})
               .infos[-1]["verified"] for i in range(5600))
    assert abs(wins - 100) < 35  # binomial sd 9.9


def test_check_prob_one_reports_every_fix_and_the_summary_keeps_a_failed_test():
    n, stage = 8, 3
    env = make(n_stages=n, check_prob=1.0)
    env.reset(seed=3, options={"task_index": 9})
    actions = oracle_actions(env)
    other = next(a for a in sorted(set(env.task.table.values())) if a != env.task.answer(stage))
    actions[1 + stage] = f"fix {env.task.stages[stage]} {other}"
    env.reset(seed=3, options={"task_index": 9})
    steps = play(env, actions)
    fixes = [s[0] for s in steps[1:1 + n]]
    # every fix output starts with its verdict: passed for the right ones, failed for stage 4
    assert [f.split("\n")[0] for f in fixes] == ["test : passed ."] * stage + ["test : failed ."] + \
        ["test : passed ."] * (n - stage - 1)
    tok = get_tokenizer()
    for obs in fixes:
        tok.encode(obs)  # every word is in the vocabulary
    assert steps[-1][4]["verified"] == 0


def test_check_prob_keeps_a_failed_test_in_the_memory_facts():
    env = make(n_stages=8, check_prob=1.0)
    env.reset(seed=3, options={"task_index": 9})
    env.step("read notes")
    assert env.memory_facts().last_test_status == "8 stages left"
    wrong = next(a for a in FIX_NAMES if a != env.task.answer(0))
    env.step(f"fix {env.task.stages[0]} {wrong}")
    env.step(f"fix {env.task.stages[1]} {env.task.answer(1)}")
    assert env.memory_facts().last_test_status == "6 stages left , a test failed"
    assert env.memory_facts().code_state == "6 stages left , then submit , a test failed"
    get_tokenizer().encode(env.memory_facts().code_state)


def test_check_prob_failed_test_survives_a_structured_summary():
    wrapped = envs.make(ID, n_stages=8, check_prob=1.0, compression={"strategy": "structured_summary", "trigger": "turns",
                                                                        "every_turns": 3})
    wrapped.reset(seed=3, options={"task_index": 9})
    env = wrapped.unwrapped
    wrapped.step("read notes")
    wrong = next(a for a in FIX_NAMES if a != env.task.answer(0))
    wrapped.step(f"fix {env.task.stages[0]} {wrong}")
    texts = [wrapped.step(f"fix {env.task.stages[k]} {env.task.answer(k)}")[0] for k in range(1, 4)]
    summary = next(t for t in texts if t.startswith("context compressed"))
    # the third turn (read, wrong fix, right fix) compresses: 6 of 8 stages left, the failed test kept
    assert "code state : 6 stages left , then submit , a test failed" in summary


def test_check_prob_zero_is_the_silent_env_draw_for_draw():
    """Without checks no extra random draw is made: the same seed gives the same observations and
    tool seconds as an env built without the knob."""
    a, b = make(n_stages=8), make(n_stages=8, check_prob=0.0)
    a.reset(seed=5, options={"task_index": 2})
    b.reset(seed=5, options={"task_index": 2})
    acts = oracle_actions(a)
    a.reset(seed=5, options={"task_index": 2})
    assert [(s[0], s[4]["tool_seconds"]) for s in play(a, acts)] == [(s[0], s[4]["tool_seconds"]) for s in play(b, acts)]


def test_check_prob_reports_about_that_share_of_fixes():
    # 200 episodes x 8 fixes at p = 0.25: 400 expected reports, binomial sd sqrt(1600 * 0.25 * 0.75) = 17.3;
    # 400 +- 70 is four sd
    env = make(n_stages=8, check_prob=0.25)
    shown = 0
    for i in range(200):
        env.reset(seed=i, options={"task_index": i})
        acts = oracle_actions(env)
        env.reset(seed=i, options={"task_index": i})
        shown += sum(s[0].startswith("test : passed") for s in play(env, acts))
    assert 330 <= shown <= 470
