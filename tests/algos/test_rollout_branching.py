"""Branching an episode in the rollout engine (``RolloutRequest.forced`` / ``reseed``): a forced
prefix replays the env exactly, and the env's tool stream is re-seeded just before the first
sampled token (what ``experiments.value_ceiling`` relies on)."""

from __future__ import annotations

import pytest
import torch

import envs
from algos.backend import WORD_LAYOUT
from algos.policy import PolicyModel, PolicyShape
from algos.requests import RolloutRequest
from algos.rollout import RolloutEngine
from envs.tokenizer import get_tokenizer

TOK = get_tokenizer()
BUGFIX = "agentrl/BugFix-v2"
# every tool call times out with probability 1/2 (the status sequence is the tool stream's fingerprint)
FAULTS = dict(difficulty="easy", timeout_prob=0.5, flaky_prob=0.0, crash_prob=0.0, max_consecutive_timeouts=50,
              max_turns=8)
OPTIONS = {"task_index": 3, "split": "train"}


def action_tokens(action: str) -> list[int]:
    return TOK.encode(action) + [TOK.eos_id]


class ScriptedPolicy:
    """A policy backend (``algos.backend.PolicyBackend``, word layout) for ``RolloutEngine.collect``:
    every row writes ``run_tests`` EOS over and over (logits put all mass on the next scripted
    token of that row)."""

    layout = WORD_LAYOUT

    def __init__(self, n_rows: int) -> None:
        self.script = action_tokens("run_tests")
        self.count = [0] * n_rows
        self.real = PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=8, n_layers=1, n_heads=1, max_len=256))
        self.module = self.real

    def forward_at(self, tokens, want, detach_value: bool = False):
        return self.real.forward_at(tokens, want, detach_value=detach_value)

    def n_params(self) -> int:
        return 0

    def new_cache(self, n: int):
        return self.real.new_cache(n)

    def step_last(self, cache, tokens, n_new, rows=None):
        logits = torch.full((tokens.shape[0], TOK.vocab_size), -1e9)
        for b in range(tokens.shape[0]):
            if int(n_new[b]) == 0:
                continue
            if int(n_new[b]) > 1:  # a new observation was fed: the next action starts
                self.count[b] = 0
            logits[b, self.script[self.count[b] % len(self.script)]] = 0.0
            self.count[b] += 1
        return logits


def run(requests: list[RolloutRequest], model=None) -> list:
    engine = RolloutEngine(BUGFIX, num_envs=len(requests), max_len=256, max_action_tokens=8, temperature=1.0,
                           env_kwargs=FAULTS)
    model = model if model is not None else ScriptedPolicy(len(requests))
    out = engine.collect(model, requests, generator=torch.Generator().manual_seed(5))
    engine.close()
    return out


def statuses(traj) -> list[str]:
    return [t.tool_status for s in traj.segments for t in s.turns]


def by_hand(n_turns: int, reseed_after: int | None, reseed: int = 0) -> list[str]:
    """The statuses of ``n_turns`` ``run_tests`` calls on the env itself, its tool stream re-seeded
    (``reseed_tools(reseed)``) after ``reseed_after`` turns."""
    env = envs.make(BUGFIX, **FAULTS)
    env.reset(seed=9, options=OPTIONS)
    out = []
    for k in range(n_turns):
        if k == reseed_after:
            env.unwrapped.reseed_tools(reseed)
        out.append(env.step("run_tests")[4]["tool_status"])
    return out


def test_a_fully_forced_request_replays_the_trajectory_exactly():
    torch.manual_seed(0)
    model = PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=32, n_layers=1, n_heads=2, max_len=256)).eval()
    [orig] = run([RolloutRequest(OPTIONS, seed=9)], model)
    forced = tuple(t for s in orig.segments for t, m in zip(s.tokens, s.action_mask) if m)
    [replay] = run([RolloutRequest(OPTIONS, seed=9, forced=forced, reseed=123)], model)  # never samples: no reseed
    assert [s.tokens for s in replay.segments] == [s.tokens for s in orig.segments]
    assert statuses(replay) == statuses(orig) and replay.train_reward == orig.train_reward
    assert replay.stop_reason == orig.stop_reason and replay.tool_seconds == orig.tool_seconds


@pytest.mark.parametrize("partial", [False, True])
def test_the_tool_stream_is_reseeded_just_before_the_first_sampled_token(partial):
    plain = by_hand(8, None)
    assert plain == statuses(run([RolloutRequest(OPTIONS, seed=9)])[0])  # the scripted agent is the by-hand one
    # two forced actions (+ the first word of the third: the reseed then lands inside that action,
    # before its env step)
    forced = tuple(action_tokens("run_tests") * 2 + (TOK.encode("run_tests") if partial else []))
    [branch] = run([RolloutRequest(OPTIONS, seed=9, forced=forced, reseed=77)])
    expected = by_hand(8, reseed_after=2, reseed=77)
    assert statuses(branch) == expected
    assert expected[:2] == plain[:2] and expected[2:] != plain[2:]  # the test can see a reseed
    [kept] = run([RolloutRequest(OPTIONS, seed=9, forced=forced)])  # reseed None: the seed's own stream
    assert statuses(kept) == plain


def test_reseed_on_an_env_without_a_tool_stream_is_an_error():
    engine = RolloutEngine("agentrl/LongHorizon-v1", num_envs=1, max_len=256, max_action_tokens=6,
                           env_kwargs=dict(n_stages=2, n_approaches=2, verbose=0))
    torch.manual_seed(0)
    model = PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_len=256)).eval()
    with pytest.raises(ValueError, match="reseed_tools"):
        engine.collect(model, [RolloutRequest({"task_index": 0, "split": "train"}, seed=1, reseed=3)])
