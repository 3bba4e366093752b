"""The tiny backend's numbers are pinned: at fixed seeds the rollout engine (through
``algos.backend.TinyBackend``) and one GRPO and one PPO update give exactly the values the direct
``PolicyModel`` path gave before backends existed (recorded from that code, compared bitwise as
float hex)."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest
import torch

import envs
from algos.backend import WORD_LAYOUT, PolicyBackend, TinyBackend, as_backend
from algos.policy import PolicyShape, build_models
from algos.registry import make_trainer
from algos.rollout import RolloutEngine, make_requests
from envs.tokenizer import get_tokenizer
from experiments.runtime.schema import AlgoConfig

DIGEST = "78fd878739f305443463fa5bfd6a407caf7cd3c164e79e4a306af2cc40476dfe"
TOKENS0 = [1, 32, 17, 77, 66, 78, 79, 80, 67, 81, 19, 82, 17, 66, 67, 68, 69, 3, 157, 517, 426, 94, 7, 517, 501, 78, 359, 106, 235, 124, 316, 118, 534, 448, 2, 5, 6, 7, 3, 354]
LOGP0 = ['-0x1.9991420000000p+2', '-0x1.954aca0000000p+2', '-0x1.9cdbee0000000p+2', '-0x1.8ca6140000000p+2', '-0x1.87d3ea0000000p+2', '-0x1.96de0e0000000p+2']
UPDATE = {"grpo": ("-0x1.d12f940000000p-7", "0x1.6053c5a4f54b0p+6", 215054532.0),
          "ppo": ("-0x1.9f80b00000000p-7", "0x1.6112783e2cd7fp+6", 215054532.0)}


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _rollout(through_backend: bool):
    shape = PolicyShape(vocab_size=get_tokenizer().vocab_size, d_model=32, n_layers=1, n_heads=2, max_len=256,
                        critic="head")
    policy, _ = build_models(shape, seed=11)
    eng = RolloutEngine(envs.BUGFIX_ID, num_envs=4, max_len=256, max_action_tokens=16)
    model = TinyBackend(policy) if through_backend else policy
    trajs = eng.collect(model, make_requests(2, 3, seed=5, task_indices=[0, 1]),
                        generator=torch.Generator().manual_seed(7))
    eng.close()
    return policy, trajs


def _digest(trajs) -> str:
    h = hashlib.sha256()
    for t in trajs:
        for s in t.segments:
            h.update(json.dumps([s.tokens, s.action_mask, [float(x).hex() for x in s.behavior_logp]]).encode())
    return h.hexdigest()


@pytest.mark.parametrize("through_backend", [False, True])
def test_tiny_rollout_tokens_and_logprobs_are_pinned(through_backend):
    _, trajs = _rollout(through_backend)
    assert trajs[0].segments[0].tokens[:40] == TOKENS0
    assert [float(x).hex() for x in trajs[0].segments[0].behavior_logp if x != 0][:6] == LOGP0
    assert _digest(trajs) == DIGEST


@pytest.mark.parametrize("name", ["grpo", "ppo"])
def test_tiny_update_is_pinned(name):
    policy, trajs = _rollout(True)
    for i, t in enumerate(trajs):  # distinct outcomes so both updates move the weights
        t.train_reward = float(i % 2)
        t.segments[-1].turns[-1].reward = float(i % 2)
    torch.manual_seed(0)
    tr = make_trainer(name, AlgoConfig(name=name, epochs=2, minibatches=2, micro_batch_rows=4), policy)
    m = tr.update(copy.deepcopy(trajs))
    loss, params, flops = UPDATE[name]
    assert float(m["train/policy_loss"]).hex() == loss
    assert float(sum(x.detach().double().sum() for x in policy.parameters())).hex() == params
    assert tr.meter.state_dict()["train_flops"] == flops


def test_as_backend_wraps_a_policy_model_and_rejects_other_objects():
    policy, _ = build_models(PolicyShape(vocab_size=get_tokenizer().vocab_size, d_model=32, n_layers=1, n_heads=2), seed=0)
    b = as_backend(policy)
    assert isinstance(b, TinyBackend) and isinstance(b, PolicyBackend) and b.layout is WORD_LAYOUT
    assert as_backend(b) is b
    with pytest.raises(ValueError, match="neither a PolicyModel nor a PolicyBackend"):
        as_backend(object())


def test_word_layout_matches_the_bos_obs_sep_layout():
    tok = get_tokenizer()
    ids, kept = WORD_LAYOUT.first("run_tests", 100)
    assert ids == [tok.bos_id, *tok.encode("run_tests"), tok.sep_id] and kept == tok.encode("run_tests")
    assert WORD_LAYOUT.next("run_tests") == [*tok.encode("run_tests"), tok.sep_id]
    assert WORD_LAYOUT.action_text([*tok.encode("view main"), tok.eos_id], capped=False) == "view main"
