"""GRPO trainer: group members are trajectories (not segments), outcome advantages broadcast to
every action token, masking, dynamic sampling, observation tokens out of the loss."""

import copy
import dataclasses

import pytest

import torch

from algos.batch import collate
from algos.group import GroupTrainer, outcome_inputs
from algos.grpo import grpo_estimator
from algos.losses import aggregation_weights
from algos.policy import PolicyModel, PolicyShape
from algos.trainer import make_trainer
from algos.update import UpdateInputs
from experiments.runtime.schema import AlgoConfig
from synthetic_trajectories import make_traj

torch.set_num_threads(1)


def model(seed=0):
    torch.manual_seed(seed)
    return PolicyModel(PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256))


def algo(**kw):
    base = dict(name="grpo", off_policy_correction="none", lr=1e-2)
    base.update(kw)
    return AlgoConfig(**base)


def trajectory_advantages(trajectories, std, eps):
    """GRPO's ``[N]`` advantages of the trajectories' outcomes (the registered estimator)."""
    return grpo_estimator(*outcome_inputs(trajectories), algo(std=std, adv_eps=eps))


def test_segments_stay_one_group_member_with_equal_token_advantages():
    """C13/C14: a trajectory cut into 3 segments (success) and one cut into 6 (failure), same task:
    2 group members, not 9. rewards [1, 0]: mean 0.5, population std 0.5 -> A = [+1, -1]."""
    a, b = make_traj([1, 1, 1], 1.0, seed=1), make_traj([1] * 6, 0.0, seed=2)
    adv = trajectory_advantages([a, b], std="population", eps=0.0)
    assert adv.tolist() == [1.0, -1.0]
    batch = collate([a, b])
    assert batch.num_rows == 9
    trainer = GroupTrainer(algo(adv_eps=0.0), model())
    inputs = UpdateInputs(old_logp=torch.zeros_like(batch.behavior_logp), ref_logp=None,
                          loss_mask=batch.action_mask.clone())
    out = trainer.advantages(batch, inputs)
    assert out.per_trajectory.tolist() == [1.0, -1.0]
    tok_adv = out.tokens
    m = batch.action_mask > 0
    for row in range(9):
        expected = 1.0 if batch.row_traj[row] == 0 else -1.0
        assert tok_adv[row][m[row]].tolist() == [expected] * int(m[row].sum())
        assert tok_adv[row][~m[row]].abs().sum() == 0  # observation tokens get nothing
    # task-mean pools a trajectory's segments: each trajectory weighs 1/2 however it was cut
    w = aggregation_weights(batch.action_mask, "task-mean", traj_ids=batch.row_traj)
    per_traj = torch.zeros(2).index_add_(0, batch.row_traj, w.sum(1))
    torch.testing.assert_close(per_traj, torch.tensor([0.5, 0.5]))


def test_group_comparison_needs_no_step_alignment():
    """C12: a 4-step success vs a 10-step failure of the same task, compared by outcome only."""
    short_win, long_loss = make_traj([4], 1.0, seed=3), make_traj([10], 0.0, seed=4)
    adv = trajectory_advantages([short_win, long_loss], std="population", eps=0.0)
    assert adv.tolist() == [1.0, -1.0]


def _update(trajs, **kw):
    m = model()
    trainer = make_trainer("grpo", algo(**kw), m)
    metrics = trainer.update(trajs)
    return m, metrics


def test_one_update_changes_parameters():
    m0 = model()
    m1, metrics = _update([make_traj([2], 1.0, seed=1), make_traj([3], 0.0, seed=2)])
    changed = [n for (n, p), q in zip(m1.named_parameters(), m0.parameters()) if not torch.equal(p, q)]
    assert changed, "an update must change the policy"
    assert metrics["train/trajectories"] == 2 and metrics["train/grad_norm"] > 0


def test_masked_episode_contributes_zero_gradient():
    trajs = [make_traj([2], 1.0, seed=1), make_traj([3], 0.0, seed=2)]
    masked = make_traj([5], 0.0, masked=True, seed=9)
    with_masked, metrics = _update(trajs + [masked])
    without, _ = _update(trajs)
    assert metrics["train/masked_trajectories"] == 1 and metrics["train/trajectories"] == 2
    for p, q in zip(with_masked.parameters(), without.parameters()):
        assert torch.equal(p, q)


def test_all_same_group_has_zero_task_gradient_and_dynamic_sampling_drops_it():
    same = [make_traj([2], 1.0, group=0, seed=1), make_traj([2], 1.0, group=0, seed=2)]
    m0 = model()
    m1, _ = _update(same)
    for p, q in zip(m1.parameters(), m0.parameters()):
        assert torch.equal(p, q)  # advantages exactly 0 -> no gradient (no KL term here)
    mixed = [make_traj([2], 1.0, group=1, seed=3), make_traj([2], 0.0, group=1, seed=4)]
    _, metrics = _update(same + mixed, dynamic_sampling=True)
    assert metrics["train/dropped_trajectories"] == 2 and metrics["train/dropped_groups"] == 1
    assert metrics["train/trajectories"] == 2


def test_loss_mask_is_the_action_mask_and_a_wrong_mask_changes_the_update():
    """C8: env-written tokens have zero loss weight (prepare_batch's loss mask is the action mask);
    putting them in the loss, built directly as a wrong UpdateInputs.loss_mask, changes the update."""
    trajs = [make_traj([2, 2], 1.0, seed=1), make_traj([3], 0.0, seed=2, obs_len=6)]
    runs = {}
    for wrong in (False, True):
        m = model()
        trainer = make_trainer("grpo", algo(), m)
        batch, inputs = trainer.prepare_batch(copy.deepcopy(trajs))
        assert torch.equal(inputs.loss_mask, batch.action_mask)
        if wrong:  # every real token but the first enters the loss
            inputs = dataclasses.replace(inputs, loss_mask=(batch.valid & (torch.arange(batch.tokens.shape[1]) > 0)).float())
        adv = trainer.advantages(batch, inputs)
        assert (adv.tokens[inputs.loss_mask == 0] == 0).all()
        runs[wrong] = (m, trainer.optimize(batch, inputs, adv))
    (right, m_right), (wrong_model, m_wrong) = runs[False], runs[True]
    assert m_right["train/policy_loss"] != m_wrong["train/policy_loss"]
    assert any(not torch.equal(p, q) for p, q in zip(right.parameters(), wrong_model.parameters()))


def test_kl_to_reference_gives_gradient_on_all_same_group():
    """C3/C25: the task part is zero, a KL term to a separate frozen reference still pulls."""
    from algos.trainer import frozen_copy

    m = model()
    ref = frozen_copy(model(seed=5))  # a different frozen model: KL != 0
    trainer = make_trainer("grpo", algo(kl_coef=0.5), m, reference=ref)
    before = copy.deepcopy(m)
    metrics = trainer.update([make_traj([2], 1.0, seed=1), make_traj([2], 1.0, seed=2)])
    assert metrics["train/kl_ref"] > 0
    assert any(not torch.equal(p, q) for p, q in zip(m.parameters(), before.parameters()))
    assert all(not p.requires_grad for p in ref.parameters())


def test_micro_batches_accumulate_to_the_full_batch_update():
    trajs = [make_traj([2, 1], 1.0, seed=1), make_traj([3], 0.0, seed=2), make_traj([1], 1.0, group=1, seed=3),
             make_traj([2], 0.0, group=1, seed=4)]
    for agg in ("token-mean", "task-mean", "seq-mean-token-mean"):
        full, _ = _update(copy.deepcopy(trajs), loss_agg=agg, micro_batch_rows=64)
        sliced, _ = _update(copy.deepcopy(trajs), loss_agg=agg, micro_batch_rows=1)
        # micro-batches are trimmed to their own longest row, so float32 rounding differs from the
        # full batch's; AdamW's first steps (lr * g / (|g| + eps)) amplify it on near-zero gradient
        # entries to ~1e-5 (the gradients themselves agree to ~1e-7): test_trainer's tolerance
        for p, q in zip(full.parameters(), sliced.parameters()):
            torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


def test_a_token_budget_slices_the_update_without_changing_it():
    """policy.micro_batch_tokens (Trainer.micro_batch_tokens) bounds each slice's padded positions
    (every row alone at a budget of 1); the update equals the unbudgeted one within float
    tolerance, and the slices really are smaller (the trainer's forward count: one per row)."""
    trajs = [make_traj([2, 1], 1.0, seed=1), make_traj([3], 0.0, seed=2), make_traj([1], 1.0, group=1, seed=3),
             make_traj([2], 0.0, group=1, seed=4)]
    models, forwards = [], []
    for budget in (None, 1):
        m = model()
        trainer = make_trainer("grpo", algo(micro_batch_rows=64), m)
        trainer.micro_batch_tokens = budget
        calls = []
        inner = trainer.forward_at
        trainer.forward_at = lambda tokens, *a, **k: calls.append(tokens.shape[0]) or inner(tokens, *a, **k)
        trainer.update(copy.deepcopy(trajs))
        models.append(m)
        forwards.append(calls)
    assert max(forwards[0]) > 1 and forwards[1] == [1] * len(forwards[1])
    for p, q in zip(*(m.parameters() for m in models)):
        torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


def test_signed_advantage_mass_is_logged_and_does_not_depend_on_the_split():
    """train/signed_adv_mass of a group of two: a 1-turn success (2 action tokens: word + EOS,
    A = +1) and a 3-turn failure (6 action tokens, A = -1; adv_eps 0). token-mean: (2 - 6) / 8 =
    -0.5 (the longer failure outweighs the success); task-mean: 1/2 - 1/2 = 0, also when the
    failure is cut into 2 segments. The same value for every split into minibatches / slices."""
    def mass(fail_segments, **kw):
        trajs = [make_traj([1], 1.0, seed=1), make_traj(fail_segments, 0.0, seed=2)]
        return _update(trajs, adv_eps=0.0, **kw)[1]["train/signed_adv_mass"]

    for split in ({}, {"micro_batch_rows": 1}, {"minibatches": 2}):
        assert mass([3], loss_agg="token-mean", **split) == pytest.approx(-0.5)
        assert mass([3], loss_agg="task-mean", **split) == pytest.approx(0.0, abs=1e-7)
        assert mass([1, 2], loss_agg="task-mean", **split) == pytest.approx(0.0, abs=1e-7)


def test_update_refuses_trajectories_sampled_at_another_temperature():
    """Old log-probs are recomputed at the trainer's temperature; behavior log-probs taken at a
    different one would make every ratio wrong, so the update stops with a clear error."""
    a, b = make_traj([2], 1.0, seed=1), make_traj([2], 0.0, seed=2)
    a.temperature = b.temperature = 0.7
    trainer = GroupTrainer(algo(), model(), temperature=1.0)
    with pytest.raises(ValueError, match=r"sampled at temperature \[0.7\].*recomputes log-probs at 1.0"):
        trainer.update([a, b])
    a.temperature = b.temperature = 1.0  # matching temperature (and None = scripted demo) is fine
    assert trainer.update([a, b])["train/trajectories"] == 2


def test_learning_rate_schedule_follows_the_budget_fraction():
    # linear: lr * (1 - f); algo lr 1e-2 -> f=0.25: 7.5e-3, f=1: 0 (and f beyond 1 is clipped to 1)
    trainer = GroupTrainer(algo(lr_schedule="linear"), model())
    assert trainer.set_budget_fraction(0.25) == pytest.approx(7.5e-3)
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(7.5e-3)
    assert trainer.set_budget_fraction(1.3) == 0.0
    # constant: lr whatever the fraction
    assert GroupTrainer(algo(), model()).set_budget_fraction(0.9) == pytest.approx(1e-2)
    with pytest.raises(ValueError, match="lr_schedule='cosine' is not a valid choice; allowed: constant, linear"):
        GroupTrainer(algo(lr_schedule="cosine"), model())
