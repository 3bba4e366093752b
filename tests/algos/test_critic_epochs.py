"""PPO's critic-only passes (``algo.critic_epochs``): after the joint epochs, more optimizer steps
on the value loss alone, with only the critic's forward."""

import copy

import pytest
import torch

from algos.batch import collate
from algos.policy import PolicyModel, PolicyShape, ValueModel, shift_values
from algos.trainer import make_trainer, value_positions
from experiments.config import AlgoConfig, ConfigError
from synthetic_trajectories import make_traj


def _algo(**kw):
    base = dict(name="ppo", group_size=1, off_policy_correction="none", lr=1e-2, epochs=2, minibatches=2,
                micro_batch_rows=2)
    base.update(kw)
    return AlgoConfig(**base)


def _trajs():
    return [make_traj([2, 1], 1.0, group=i, seed=i) if i % 2 else make_traj([3], 0.0, group=i, seed=i) for i in range(6)]


def _models(critic):
    torch.manual_seed(0)
    shape = PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256, critic=critic)
    return PolicyModel(shape), (ValueModel(shape) if critic == "separate" else None)


def _updated(critic, **kw):
    policy, value = _models(critic)
    trainer = make_trainer("ppo", _algo(**kw), policy, value)
    metrics = trainer.update(_trajs())
    return policy, value, trainer, metrics


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_critic_passes_leave_the_policy_where_the_joint_epochs_put_it(critic):
    """The joint epochs draw the same minibatch permutations (the critic passes come after them),
    so the policy ends exactly where it ends without critic passes; the critic moves further."""
    p0, v0, _, m0 = _updated(critic, critic_epochs=0)
    p2, v2, t2, m2 = _updated(critic, critic_epochs=2)
    for (name, a), b in zip(p0.named_parameters(), p2.parameters()):
        if name.startswith("value_head"):
            assert not torch.equal(a, b), name
        else:
            assert torch.equal(a, b), name
    if critic == "separate":
        assert any(not torch.equal(a, b) for a, b in zip(v0.parameters(), v2.parameters()))
    # the joint steps' logs are the same numbers; the critic passes log under their own names
    for key in ("train/policy_loss", "train/value_loss", "train/grad_norm", "train/clip_frac"):
        assert m2[key] == pytest.approx(m0[key], rel=1e-6, abs=1e-9), key
    assert "train/critic_pass_value_loss" in m2 and "train/critic_pass_grad_norm" in m2
    assert "train/critic_pass_value_loss" not in m0


def test_a_critic_pass_is_one_adamw_step_on_the_value_loss_alone():
    """Independent reference: after a critic_epochs=0 update (epochs=1, one minibatch), one more
    step by hand on the separate critic: its values at the value positions, the clipped value
    loss ``0.5 * max((v - R)^2, (v_old + clamp(v - v_old, -c, c) - R)^2)`` token-mean over the
    decision points, times vf_coef, the same clipped-gradient AdamW step. A critic_epochs=1 update
    must end at the same critic weights."""
    kw = dict(epochs=1, minibatches=1, micro_batch_rows=64, vf_coef=0.5, value_clip=0.2)
    policy, value = _models("separate")
    ref = make_trainer("ppo", _algo(critic_epochs=0, **kw), policy, value)
    record = ref.update_record(_trajs())
    batch, adv = record.batch, record.advantages
    ref.optimizer.zero_grad(set_to_none=True)
    v = shift_values(value(batch.tokens, at=value_positions(batch)))
    m = adv.value_mask > 0
    vv, old, ret = v[m], adv.old_values[m], adv.returns[m]
    sq = torch.maximum((vv - ret) ** 2, (old + (vv - old).clamp(-0.2, 0.2) - ret) ** 2)
    (0.5 * (0.5 * sq).sum() / m.sum()).backward()
    torch.nn.utils.clip_grad_norm_(list(policy.parameters()) + list(value.parameters()), 1.0)
    ref.optimizer.step()

    p1, v1, _, metrics = _updated("separate", critic_epochs=1, **kw)
    for a, b in zip(value.parameters(), v1.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(policy.parameters(), p1.parameters()):
        assert torch.equal(a, b)
    assert metrics["train/critic_pass_value_loss"] == pytest.approx(float((0.5 * sq).detach().sum() / m.sum()), rel=1e-5)


def test_critic_passes_count_the_critic_flops_only():
    """A critic pass adds one forward + backward of the separate critic over the batch's real
    tokens, ``6 N_critic tokens + 3 A`` (``algos.compute``), and nothing for the policy."""
    from algos.compute import attention_flops
    from algos.policy import count_params

    e1 = _updated("separate", critic_epochs=0, epochs=1)[2].meter.train_flops
    _, value, trainer, _ = _updated("separate", critic_epochs=1, epochs=1)
    lengths = collate(_trajs()).valid.sum(1)
    one_pass = 6.0 * count_params(value) * int(lengths.sum()) + 3.0 * attention_flops(1, 16, lengths)
    assert trainer.meter.train_flops - e1 == pytest.approx(one_pass, rel=1e-9)


def test_critic_epochs_must_be_non_negative():
    with pytest.raises(ConfigError, match="algo.critic_epochs=-1"):
        _algo(critic_epochs=-1)


def test_ppo_ctde_refuses_critic_passes():
    from algos.ppo_ctde import CentralCriticPPOTrainer

    policy, value = _models("separate")
    algo = AlgoConfig(name="ppo_ctde", critic_epochs=1)
    with pytest.raises(ValueError, match="algo.critic_epochs=1 is not supported by ppo_ctde"):
        CentralCriticPPOTrainer(algo, policy, value)
