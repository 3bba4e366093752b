"""The rollout engine's agent dimension on PairFix with a Hugging Face policy (the tiny offline
model of ``experiments.runtime.hf_tiny``, CPU float32): both agents decode from one cache with a
row per (slot, agent), each reads only its own chat-template context, and a scripted agent's turns
are laid out in the policy's layout."""

from __future__ import annotations

from functools import partial

import pytest
import torch

pytest.importorskip("transformers")

import envs  # noqa: E402
from algos.hf_backend import load_policy  # noqa: E402
from algos.pair_rollout import PairEpisode  # noqa: E402
from algos.requests import make_requests  # noqa: E402
from algos.rollout import RolloutEngine  # noqa: E402
from envs.pairfix.agents import PairOracle  # noqa: E402

MAX_LEN = 1024


def _engine(num_envs: int, max_action_tokens: int = 12) -> RolloutEngine:
    return RolloutEngine(envs.PAIRFIX_ID, num_envs, MAX_LEN, max_action_tokens,
                         make_env=partial(envs.make_multi_agent, envs.PAIRFIX_ID, difficulty="easy"))


def _record_actions(engine: RolloutEngine) -> dict:
    """``{(env seed, agent): [action texts the env received]}`` and, under ``(env seed, agent,
    "first")``, the first observation the agent was shown; filled while ``engine`` collects."""
    log: dict = {}
    for env in engine.envs:
        reset, step, observe, seed = env.reset, env.step, env.observe, [None]

        def recording_reset(seed_=seed, reset_=reset, **kw):
            seed_[0] = kw["seed"]
            return reset_(**kw)

        def recording_step(action, env_=env, seed_=seed, step_=step):
            log.setdefault((seed_[0], env_.agent_selection), []).append(action)
            return step_(action)

        def recording_observe(agent, seed_=seed, observe_=observe):
            obs = observe_(agent)
            log.setdefault((seed_[0], agent, "first"), obs)
            return obs
        env.reset, env.step, env.observe = recording_reset, recording_step, recording_observe
    return log


@pytest.fixture(scope="module")
def hf_pair(hf_model_dir):
    """Four PairFix episodes of a shared Hugging Face policy on two env slots, and the action
    texts the envs received."""
    backend = load_policy(hf_model_dir, device="cpu", dtype="float32")
    engine = _engine(2)
    log = _record_actions(engine)
    reqs = make_requests(4, 1, seed=3, task_indices=[0, 1, 2, 3])
    episodes = engine.collect(backend, reqs, policy_version=2, generator=torch.Generator().manual_seed(0))
    engine.close()
    return backend, reqs, episodes, log


def test_a_hugging_face_policy_plays_pairfix(hf_pair):
    backend, reqs, episodes, log = hf_pair
    layout = backend.layout
    assert len(episodes) == 4 and all(isinstance(ep, PairEpisode) for ep in episodes)
    assert sum(t.turns for ep in episodes for t in ep.trajectories()) >= 8
    for req, ep in zip(reqs, episodes):
        assert ep.agents()[0] == "a"  # a acts first
        for agent, t in zip(ep.agents(), ep.trajectories()):
            (seg,) = t.segments
            assert (t.agent, t.seed, t.policy_version, t.temperature) == (agent, req.seed, 2, 1.0)
            # its own chat-template context, opened by its first observation (cut to leave an action's room)
            first = layout.first(log[(req.seed, agent, "first")], MAX_LEN - 14)[0]
            assert seg.tokens[: len(first)] == first and f"agent {agent} " in log[(req.seed, agent, "first")]
            # the env received exactly the decoded sampled ids, in the agent's turn order
            texts = [layout.action_text(seg.tokens[turn.start: turn.end + 1], turn.capped) for turn in seg.turns]
            assert texts == log[(req.seed, agent)]
            # one joint state per turn, closed by the layout's separator
            sep = layout.next("")
            assert len(t.joint_points) == t.turns and all(j[-len(sep):] == sep for j in t.joint_points)


def test_behavior_logprobs_equal_a_teacher_forced_forward_of_each_agents_own_context(hf_pair):
    """Each agent decodes in its own cache row (two rows per slot); a row that held the other
    agent's ids or missed an observation would give log-probs far from a full forward's."""
    backend, _, episodes, _ = hf_pair
    for t in (t for ep in episodes for t in ep.trajectories()):
        (seg,) = t.segments
        with torch.no_grad():
            lp = torch.log_softmax(backend.module.lm(input_ids=torch.tensor([seg.tokens])).logits[0].float(), -1)
        for i, (m, b) in enumerate(zip(seg.action_mask, seg.behavior_logp)):
            if m:
                assert abs(float(lp[i - 1, seg.tokens[i]]) - b) <= 1e-5


def test_a_scripted_agent_beside_the_policy_is_laid_out_in_its_layout(hf_model_dir):
    backend = load_policy(hf_model_dir, device="cpu", dtype="float32")
    engine = _engine(2, max_action_tokens=32)  # the oracle's edits are longer than 12 BPE ids
    log = _record_actions(engine)
    reqs = make_requests(2, 1, seed=5, task_indices=[0, 1])
    episodes = engine.collect({"a": backend, "b": partial(PairOracle, 0.0)}, reqs,
                              generator=torch.Generator().manual_seed(1))
    engine.close()
    for req, ep in zip(reqs, episodes):
        b = ep.for_agent("b")
        if b is None:  # a ended the episode on its first turn
            continue
        (seg,) = b.segments
        assert (b.policy_version, b.temperature) == (-1, None)
        actions = log[(req.seed, "b")]
        expected = [backend.layout.action_ids(text) for text in actions]
        assert [seg.tokens[turn.start: turn.end + 1] for turn in seg.turns] == expected
        assert all(seg.behavior_logp[i] == 0.0 for turn in seg.turns for i in range(turn.start, turn.end + 1))


def test_every_agent_scripted_writes_in_the_layout_collect_is_given(hf_model_dir):
    """A two-agent warm start's demonstrations (no policy plays): ``collect(..., layout=...)`` lays
    both agents' turns out in that layout (the Hugging Face chat layout here); without it, in the
    word layout."""
    from algos.backend import WORD_LAYOUT

    layout = load_policy(hf_model_dir, device="cpu", dtype="float32").layout
    reqs = make_requests(2, 1, seed=7, task_indices=[0, 1])
    scripted = dict.fromkeys(("a", "b"), partial(PairOracle, 0.0))
    for given, expected in ((layout, layout), (None, WORD_LAYOUT)):
        engine = _engine(2, max_action_tokens=32)
        log = _record_actions(engine)
        episodes = engine.collect(scripted, reqs, layout=given)
        engine.close()
        for req, ep in zip(reqs, episodes):
            for agent, t in zip(ep.agents(), ep.trajectories()):
                (seg,) = t.segments
                first = expected.first(log[(req.seed, agent, "first")], MAX_LEN - 34)[0]
                assert seg.tokens[: len(first)] == first
                assert [seg.tokens[u.start: u.end + 1] for u in seg.turns] == [
                    expected.action_ids(text) for text in log[(req.seed, agent)]]
