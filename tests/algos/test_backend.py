"""The tiny backend against independent references that hold on every CPU kind.

Float kernels differ between CPU kinds (AVX-512 or not) in the last bits, so nothing here compares
float bits. Each check has a reference computed in the test:

- a rollout through ``algos.backend.TinyBackend`` equals one through the bare ``PolicyModel`` and a
  second rollout at the same seeds (same process, same kernels: exact equality);
- every behaviour log-prob equals a teacher-forced forward of the finished segment (to 1e-5);
- one GRPO and one PPO update equal a hand-written step: the clipped surrogate at ratio 1 with
  hand-computed group advantages (GRPO) or the update's own GAE advantages and return targets
  (PPO, whose estimator has its own tests), the 0.5 (V - R)^2 value loss, clip-grad-norm and AdamW
  with the trainer's hyper-parameters (to 1e-5 per parameter).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import envs
from algos.backend import WORD_LAYOUT, PolicyBackend, TinyBackend, as_backend
from algos.policy import PolicyShape, build_models, shift_values
from algos.registry import make_trainer
from algos.requests import make_requests
from algos.rollout import RolloutEngine
from envs.tokenizer import get_tokenizer
from experiments.runtime.schema import AlgoConfig

# The first AdamW step moves a parameter by lr * g / (|g| + eps) ~ lr = 3e-4. Where g is within a
# few eps of 0 (embedding rows of rare tokens, whose gradient sums whitened advantages that nearly
# cancel), float noise of 1e-3 relative in g moves that step by up to ~1 % of lr; elsewhere two
# float orders differ by ~1e-7. 1e-5 is 30x below a step: a missing loss term or a flipped
# advantage moves parameters by lr or more (3e-4, 6e-4 measured), summation order does not.
PARAM_TOL = 1e-5
# log-probs of a 1-layer 32-wide model in float32: a forward over the whole segment and the
# engine's incremental decode differ by ~1e-6; a wrong position or temperature is off by >0.1.
LOGP_TOL = 1e-5


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


def _segments(trajs):
    return [(s.tokens, s.action_mask, s.behavior_logp) for t in trajs for s in t.segments]


def test_rollout_through_the_backend_equals_the_bare_policy_and_a_repeat():
    _, direct = _rollout(False)
    _, backend = _rollout(True)
    _, again = _rollout(True)
    assert len(direct) == 6 and sum(len(s[0]) for s in _segments(direct)) > 100
    assert _segments(backend) == _segments(direct)
    assert _segments(again) == _segments(backend)


def test_behavior_logprobs_equal_a_teacher_forced_forward():
    policy, trajs = _rollout(True)
    checked = 0
    with torch.no_grad():
        for t in trajs:
            for s in t.segments:
                tokens = torch.tensor([s.tokens])
                logits, _ = policy(tokens)
                logp = F.log_softmax(logits[0, :-1].double(), dim=-1).gather(1, tokens[0, 1:, None])[:, 0]
                act = torch.tensor(s.action_mask[1:]) > 0
                got = torch.tensor(s.behavior_logp[1:], dtype=torch.float64)
                assert torch.allclose(got[act], logp[act], atol=LOGP_TOL, rtol=0)
                assert (got[~act] == 0).all()  # observation tokens were not sampled
                checked += int(act.sum())
    assert checked > 50


def _with_outcomes(trajs):
    """Rewards 0, 1, 0 (group 0) and 1, 0, 1 (group 1): distinct outcomes so both updates move."""
    trajs = copy.deepcopy(trajs)
    for i, t in enumerate(trajs):
        t.train_reward = float(i % 2)
        t.segments[-1].turns[-1].reward = float(i % 2)
    return trajs


def _reference_step(policy, batch, loss_fn) -> None:
    """One optimizer step of ``loss_fn(logits, values)`` as the trainer's configuration takes it:
    clip the gradient norm to 1, AdamW(lr 3e-4, betas (0.9, 0.95), eps 1e-8, no weight decay)."""
    opt = torch.optim.AdamW(policy.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    policy.train()
    logits, values = policy(batch.tokens)
    loss = loss_fn(logits, values)
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()), 1.0)
    opt.step()
    policy.eval()


def _token_logp(logits, tokens):
    """``[R, T]`` log-prob of each token under the logits of the position before it (0 at t = 0)."""
    lp = F.log_softmax(logits[:, :-1], dim=-1).gather(2, tokens[:, 1:, None])[..., 0]
    return F.pad(lp, (1, 0))


def _surrogate(logits, batch, adv_tokens):
    """Token-mean of -A * ratio * w at ratio exp(logp - logp.detach()) = 1 (value and gradient of
    the clipped PPO objective before any step), w = min(pi_old / pi_behaviour, 2) (decoupled)."""
    m = batch.action_mask > 0
    logp = _token_logp(logits, batch.tokens)
    ratio = torch.exp(logp - logp.detach())
    w = torch.clamp(torch.exp(logp.detach() - batch.behavior_logp), max=2.0)
    return -(adv_tokens * ratio * w)[m].sum() / m.sum()


def _assert_params_close(policy, ref, start):
    moved = max(float((p - q).detach().abs().max()) for p, q in zip(policy.parameters(), start.parameters()))
    assert moved > 1e-4  # the update took a step
    for p, q in zip(policy.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=PARAM_TOL, rtol=0)


def test_grpo_update_equals_a_hand_written_step():
    policy, trajs = _rollout(True)
    start, ref = copy.deepcopy(policy), copy.deepcopy(policy)
    torch.manual_seed(0)
    tr = make_trainer("grpo", AlgoConfig(name="grpo", epochs=1, minibatches=1, micro_batch_rows=4), policy)
    rec = tr.update_record(_with_outcomes(trajs))
    # group rewards (0, 1, 0): mean 1/3, population std sqrt(((1/3)^2 + (2/3)^2 + (1/3)^2) / 3) = sqrt(2/9)
    # = 0.4714, so A = (-1/3, 2/3, -1/3) / 0.4714 = (-0.7071, 1.4142, -0.7071); group (1, 0, 1) the negatives
    a = 0.5**0.5
    per_traj = torch.tensor([-a, 2 * a, -a, a, -2 * a, a])
    batch = rec.batch
    adv = per_traj[batch.row_traj][:, None] * (batch.action_mask > 0)
    assert torch.allclose(rec.advantages.tokens, adv, atol=1e-5)
    m = batch.action_mask > 0
    # at ratio 1 the loss is -sum_t A_t w_t / N with w ~ 1
    assert rec.metrics["train/policy_loss"] == pytest.approx(float(-(adv[m]).sum() / m.sum()), abs=1e-5)
    _reference_step(ref, batch, lambda logits, values: _surrogate(logits, batch, adv))
    _assert_params_close(policy, ref, start)


def test_ppo_update_equals_a_hand_written_step():
    policy, trajs = _rollout(True)
    start, ref = copy.deepcopy(policy), copy.deepcopy(policy)
    torch.manual_seed(0)
    tr = make_trainer("ppo", AlgoConfig(name="ppo", epochs=1, minibatches=1, micro_batch_rows=4), policy)
    rec = tr.update_record(_with_outcomes(trajs))
    batch, adv = rec.batch, rec.advantages
    m, vm = batch.action_mask > 0, adv.value_mask > 0
    assert vm.any() and float(adv.tokens[m].mean()) == pytest.approx(0.0, abs=1e-5)  # whitened advantages

    def loss_fn(logits, values):
        v = shift_values(values)  # value clip is inactive at the first step: v = v_old
        value_loss = (0.5 * (v - adv.returns) ** 2)[vm].sum() / vm.sum()
        return _surrogate(logits, batch, adv.tokens) + 0.5 * value_loss  # vf_coef 0.5

    _reference_step(ref, batch, loss_fn)
    _assert_params_close(policy, ref, start)


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
