"""The shared tokenizer: fixed ids, strict encoding, and every BugFix word is in the vocabulary."""

from __future__ import annotations

import re

import pytest

from envs import vocab
from envs.bugfix.agents import AGENTS, make_agent
from envs.bugfix import DIFFICULTIES, USAGE, BugFixEnv, TASK_TEXT
from envs.episode import run_episode
from envs.tokenizer import Tokenizer, get_tokenizer


def test_special_ids_and_stability():
    tok = get_tokenizer()
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.sep_id, tok.newline_id) == (0, 1, 2, 3, 4)
    assert tok is get_tokenizer()
    assert Tokenizer().id_to_token == tok.id_to_token
    assert tok.vocab_size == len(set(tok.id_to_token)) == len(tok.id_to_token)


def test_integers_in_range_are_single_tokens_and_others_are_rejected():
    tok = get_tokenizer()
    low, high = vocab.INTEGER_RANGE
    assert len(tok.encode(f"{low} 0 {high}")) == 3
    for bad in (str(low - 1), str(high + 1), "03", "+3"):
        with pytest.raises(ValueError, match=re.escape(repr(bad))):
            tok.encode(f"edit 1 {bad} 2")


def test_encode_decode_round_trip_with_line_breaks():
    tok = get_tokenizer()
    text = "tests : 1 passed 3 failed\nfail x = 4 expected 9 got 7\nhint : line 2"
    ids = tok.encode(text)
    assert ids.count(tok.newline_id) == 2 and tok.count(text) == len(ids)
    assert tok.decode(ids) == text
    assert tok.decode([tok.bos_id, *tok.encode("ls"), tok.eos_id]) == "ls"
    assert tok.can_encode("view main") and not tok.can_encode("view secrets")


def test_bugfix_fixed_texts_encode():
    tok = get_tokenizer()
    for text in (TASK_TEXT, *USAGE.values(), *(f"error: malformed action . usage: {u}" for u in USAGE.values())):
        tok.encode(text)


def test_every_observation_action_and_memory_fact_of_scripted_episodes_encodes():
    """All agents x all difficulties with faults on (timeouts, flaky runs, crashes, clipping,
    permission denied): nothing the env prints or an agent writes raises ValueError."""
    tok = get_tokenizer()
    n_texts = 0
    for difficulty in DIFFICULTIES:
        for readable in (True, False):
            env = BugFixEnv(difficulty, timeout_prob=0.2, flaky_prob=0.3, crash_prob=0.01, max_output_words=15,
                            protected_readable=readable, wall_clock_limit=30.0)
            for a, name in enumerate(AGENTS):
                agent = make_agent(name)
                for seed in range(a * 10, a * 10 + 6):
                    options = {"split": ("train", "heldout")[seed % 2]}
                    ep = run_episode(env, agent, seed=seed, options=options).summary()
                    facts = env.memory_facts()
                    texts = [t for pair in ep["steps"] for t in pair] + [ep["final_observation"]]
                    texts += list(facts.texts())
                    for text in texts:
                        tok.encode(text)
                    n_texts += len(texts)
    assert n_texts > 5000


def test_easy_episodes_fit_a_small_context():
    """Contract layout: a turn costs len(a) + 1 + len(obs) + 1; easy oracle episodes stay small."""
    tok = get_tokenizer()
    env = BugFixEnv("easy")
    for seed in range(50):
        ep = run_episode(env, make_agent("noisy_oracle"), seed=seed).summary()
        total = 1 + tok.count(ep["steps"][0][0]) + 1
        for i, (_, action) in enumerate(ep["steps"]):
            nxt = ep["steps"][i + 1][0] if i + 1 < len(ep["steps"]) else ep["final_observation"]
            total += tok.count(action) + 1 + tok.count(nxt) + 1
            assert tok.count(action) <= 12
        assert total <= 300
