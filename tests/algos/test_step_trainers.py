"""algo=rloo, gigpo, grpo_process: advantages on the right tokens (every sampled token of a step, in
every segment), hand-computed numbers, segment-split invariance, grpo_process == GRPO under
outcome-only rewards, dynamic sampling by step signal, updates through the registry."""

import copy

import pytest
import torch

from algos.batch import collate
from algos.group import GroupTrainer
from algos.policy import PolicyModel, PolicyShape
from algos.registry import ESTIMATORS, TRAINERS, make_trainer
from algos.steps import StepTrainer
from algos.update import UpdateInputs
from experiments.runtime.schema import AlgoConfig
from synthetic_trajectories import make_traj

torch.set_num_threads(1)


def model(seed=0):
    torch.manual_seed(seed)
    return PolicyModel(PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256))


def algo(name, **kw):
    base = dict(name=name, off_policy_correction="none", lr=1e-2, adv_eps=0.0)
    base.update(kw)
    if name != "gigpo":
        base.pop("gamma", None)  # only GiGPO's schema discounts step returns
    return AlgoConfig(**base)


def advantages_of(name, trajs, **kw):
    trainer = make_trainer(name, algo(name, **kw), model())
    batch = collate(trajs)
    inputs = UpdateInputs(old_logp=torch.zeros_like(batch.behavior_logp), ref_logp=None,
                          loss_mask=batch.action_mask.clone())
    return batch, trainer.advantages(batch, inputs)


def per_step(batch, tokens):
    """For each trajectory, one value per turn (all segments in order), read from the token
    advantages; asserts every sampled token of the turn carries that same value and every
    env-written token carries 0."""
    out = [[] for _ in batch.trajectories]
    for row in range(batch.num_rows):
        seg = batch.segment(row)
        in_turns = torch.zeros(tokens.shape[1], dtype=torch.bool)
        for turn in seg.turns:
            values = tokens[row, turn.start: turn.end + 1]
            assert torch.all(values == values[0]), values
            out[int(batch.row_traj[row])].append(float(values[0]))
            in_turns[turn.start: turn.end + 1] = True
        assert (tokens[row][~in_turns] == 0).all()
    return out


def test_registry_builds_each_method_as_its_kind_trainer_with_its_estimator():
    for name, cls in (("rloo", GroupTrainer), ("gigpo", StepTrainer), ("grpo_process", StepTrainer)):
        trainer = make_trainer(name, algo(name), model())
        assert type(trainer) is cls and TRAINERS[name] is cls
        assert trainer.estimator is ESTIMATORS[name]
    with pytest.raises(ValueError, match=r"algo 'gipgo' unknown; allowed: gigpo, grouped_value, grpo, grpo_process, ppo, ppo_ctde, ppo_independent, ppo_long, ppo_segment_terminal, rloo"):
        make_trainer("gipgo", algo("gigpo"), model())


def test_rloo_outcome_advantage_on_every_token_of_every_segment():
    # rewards [1, 0, 0] in one group: 1 - (0 + 0)/2 = 1; 0 - (1 + 0)/2 = -0.5 (twice)
    trajs = [make_traj([1, 2], 1.0, seed=1, words=2), make_traj([3], 0.0, seed=2), make_traj([2], 0.0, seed=3)]
    batch, adv = advantages_of("rloo", trajs)
    assert adv.per_trajectory.tolist() == [1.0, -0.5, -0.5]
    assert per_step(batch, adv.tokens) == [[1.0] * 3, [-0.5] * 3, [-0.5] * 2]
    assert adv.metrics["train/adv_zero_frac"] == 0.0


def gigpo_group(split_a=(2, 1), split_b=(3,)):
    # a: step rewards [0, 1, 1] (R = 2), states [10, 11, 12]; b: [1, 0, 0] (R = 1), states [10, 11, 13]
    a = make_traj(list(split_a), 0.0, seed=1, words=2, step_rewards=[0, 1, 1], state_keys=[10, 11, 12])
    b = make_traj(list(split_b), 0.0, seed=2, step_rewards=[1, 0, 0], state_keys=[10, 11, 13])
    return [a, b]


def test_gigpo_hand_computed_step_advantages_across_segments():
    # A_E: R = [2, 1] -> [1, -1]. gamma 0.5: G_a = [0 + 0.5 * (1 + 0.5 * 1), 1 + 0.5 * 1, 1] = [0.75, 1.5, 1],
    # G_b = [1, 0, 0]. Step group of state 10: [0.75, 1] -> mean 0.875, std 0.125 -> [-1, 1];
    # state 11: [1.5, 0] -> [1, -1]; states 12 and 13: singletons -> 0.
    # A_a = [1 - 1, 1 + 1, 1 + 0] = [0, 2, 1]; A_b = [-1 + 1, -1 - 1, -1 + 0] = [0, -2, -1]
    batch, adv = advantages_of("gigpo", gigpo_group(), gamma=0.5)
    assert batch.num_rows == 3  # a in two segments, b in one
    assert per_step(batch, adv.tokens) == [[0.0, 2.0, 1.0], [0.0, -2.0, -1.0]]
    # 2 step groups of size >= 2 (states 10, 11) hold 4 of the 6 steps; 2 of 6 advantages are 0
    assert adv.metrics["train/step_groups"] == 2
    assert adv.metrics["train/anchor_hit_rate"] == pytest.approx(4 / 6)
    assert adv.metrics["train/adv_zero_frac"] == pytest.approx(2 / 6)
    # omega 0.5 halves the step part: A_a = [0.5, 1.5, 1], A_b = [-0.5, -1.5, -1]
    batch, adv = advantages_of("gigpo", gigpo_group(), gamma=0.5, omega=0.5)
    assert per_step(batch, adv.tokens) == [[0.5, 1.5, 1.0], [-0.5, -1.5, -1.0]]


def test_gigpo_missing_state_keys_are_singletons_not_one_group():
    """Turns without a key (-1) must not all fall into one step group: A = A_E = [1, -1] (R = [2, 1])."""
    a = make_traj([2, 1], 0.0, seed=1, step_rewards=[0, 1, 1])
    b = make_traj([3], 0.0, seed=2, step_rewards=[1, 0, 0])
    batch, adv = advantages_of("gigpo", [a, b], gamma=0.5)
    assert per_step(batch, adv.tokens) == [[1.0] * 3, [-1.0] * 3]
    assert adv.metrics["train/step_groups"] == 0 and adv.metrics["train/anchor_hit_rate"] == 0.0


def test_gigpo_64_bit_state_keys():
    """Keys are arbitrary 64-bit hashes (also above 2**63): equal keys share a step group."""
    big = 2**64 - 5
    a = make_traj([2], 0.0, seed=1, step_rewards=[0, 1], state_keys=[big, 3])
    b = make_traj([2], 0.0, seed=2, step_rewards=[0, 0], state_keys=[big, 4])
    # A_E: [1, 0] -> [1, -1]; gamma 1: G_a = [1, 1], G_b = [0, 0]; state big: [1, 0] -> [1, -1]
    batch, adv = advantages_of("gigpo", [a, b], gamma=1.0)
    assert per_step(batch, adv.tokens) == [[2.0, 1.0], [-2.0, -1.0]]


@pytest.mark.parametrize("name", ["gigpo", "grpo_process"])
def test_splitting_a_trajectory_into_segments_changes_no_step_advantage(name):
    batch, adv = advantages_of(name, gigpo_group((3,), (3,)), gamma=0.5)
    whole = per_step(batch, adv.tokens)
    assert any(v != 0 for steps in whole for v in steps)
    for split_a, split_b in (((1, 1, 1), (2, 1)), ((1, 2), (1, 1, 1))):
        batch, adv = advantages_of(name, gigpo_group(split_a, split_b), gamma=0.5)
        assert per_step(batch, adv.tokens) == whole
        assert batch.num_rows == len(split_a) + len(split_b)


def test_grpo_process_hand_computed():
    # a: step rewards [1, 0, 1]: scored s0, s2 (s1 has no reward); b: [1, 1, 0]: scored s0, s1 and s2
    # (the last step always: the outcome 0). Scored rewards [1, 1 | 1, 1, 0]: mean 0.8, population std
    # sqrt((4 * 0.2^2 + 0.8^2) / 5) = 0.4 -> r~ = 0.5 for a 1, -2 for the 0.
    # A_a = [0.5 + 0.5, 0.5 (from s2 on), 0.5]; A_b = [0.5 + 0.5 - 2, 0.5 - 2, -2] = [-1, -1.5, -2]
    a = make_traj([2, 1], 0.0, seed=1, step_rewards=[1, 0, 1])
    b = make_traj([1, 2], 0.0, seed=2, step_rewards=[1, 1, 0])
    batch, adv = advantages_of("grpo_process", [a, b])
    torch.testing.assert_close(torch.tensor(per_step(batch, adv.tokens)), torch.tensor([[1.0, 0.5, 0.5], [-1.0, -1.5, -2.0]]))
    assert adv.metrics["train/scored_step_frac"] == pytest.approx(5 / 6)


def outcome_batch():
    return [make_traj([2, 1], 1.0, seed=1, words=2), make_traj([3], 0.0, seed=2), make_traj([1], 0.0, seed=3),
            make_traj([2], 1.0, group=1, seed=4), make_traj([1, 1], 0.0, group=1, seed=5, words=3),
            make_traj([2], 1.0, group=1, seed=6)]


def test_grpo_process_with_outcome_only_rewards_equals_grpo():
    """Only the last step carries a reward: grpo_process gives GRPO's advantage on every token and
    the same update (same parameters after it, same logged loss)."""
    trajs = outcome_batch()
    _, adv_p = advantages_of("grpo_process", copy.deepcopy(trajs), adv_eps=1e-6)
    _, adv_g = advantages_of("grpo", copy.deepcopy(trajs), adv_eps=1e-6)
    torch.testing.assert_close(adv_p.tokens, adv_g.tokens)
    assert adv_g.tokens.abs().sum() > 0
    runs = {}
    for name in ("grpo", "grpo_process"):
        m = model()
        metrics = make_trainer(name, algo(name, adv_eps=1e-6, epochs=2), m).update(copy.deepcopy(trajs))
        runs[name] = (m, metrics)
    (m_g, met_g), (m_p, met_p) = runs["grpo"], runs["grpo_process"]
    for p, q in zip(m_g.parameters(), m_p.parameters()):
        torch.testing.assert_close(p, q)
    assert met_g["train/policy_loss"] == pytest.approx(met_p["train/policy_loss"])


def test_dynamic_sampling_keeps_groups_with_step_signal():
    """Group 0: equal outcomes (R = 1 each) but the shared state 5 has returns [1, 0.5] (gamma 0.5):
    step signal, kept (GRPO's equal-reward rule would drop it). Group 1: two identical members:
    A_E = 0 and constant step groups: dropped."""
    g0 = [make_traj([2], 0.0, seed=1, step_rewards=[1, 0], state_keys=[5, 6]),
          make_traj([2], 0.0, seed=2, step_rewards=[0, 1], state_keys=[5, 7])]
    g1 = [make_traj([2], 0.0, group=1, seed=3, step_rewards=[0, 1], state_keys=[8, 9]),
          make_traj([2], 0.0, group=1, seed=4, step_rewards=[0, 1], state_keys=[8, 9])]
    metrics = make_trainer("gigpo", algo("gigpo", gamma=0.5, dynamic_sampling=True), model()).update(g0 + g1)
    assert metrics["train/dropped_groups"] == 1 and metrics["train/dropped_trajectories"] == 2
    assert metrics["train/trajectories"] == 2
    assert metrics["train/groups_mixed_rate"] == 0.0  # outcomes are equal within both groups
    grpo = make_trainer("grpo", algo("grpo", dynamic_sampling=True), model()).update(copy.deepcopy(g0 + g1))
    assert grpo["train/skipped"] == 1  # GRPO drops both


def test_gigpo_needs_a_valid_omega():
    with pytest.raises(ValueError, match=r"algo=gigpo needs algo.omega"):
        make_trainer("gigpo", AlgoConfig(name="grpo"), model())  # a schema without omega
    with pytest.raises(ValueError, match=r"algo.omega=-1.0 must be a finite number >= 0"):
        make_trainer("gigpo", algo("gigpo", omega=-1.0), model())
    with pytest.raises(ValueError, match=r"algo.gamma=1.5 must be a number in \[0, 1\]"):
        make_trainer("gigpo", algo("gigpo", gamma=1.5), model())


@pytest.mark.parametrize("name", ["rloo", "gigpo", "grpo_process"])
def test_one_update_changes_parameters_and_micro_batches_accumulate(name):
    trajs = gigpo_group() + [make_traj([2], 1.0, group=1, seed=3, state_keys=[1, 2]),
                             make_traj([1, 1], 0.0, group=1, seed=4, state_keys=[1, 3])]
    m0 = model()
    params = {}
    for rows in (64, 1):
        m = model()
        metrics = make_trainer(name, algo(name, gamma=0.5, loss_agg="task-mean", micro_batch_rows=rows),
                               m).update(copy.deepcopy(trajs))
        params[rows] = m
        assert metrics["train/trajectories"] == 4 and metrics["train/grad_norm"] > 0
        assert "train/adv_zero_frac" in metrics
    assert any(not torch.equal(p, q) for p, q in zip(params[64].parameters(), m0.parameters()))
    # The invariance is of the gradient: one optimizer step (1 epoch, 1 minibatch) leaves the
    # accumulated gradient of the whole batch in .grad, and length-bucketed slices sum the same
    # loss in another float order (agreement ~1e-7). The parameters after AdamW's first step are
    # not a sturdy proxy: g / (|g| + eps) turns a ~1e-11 gradient entry's rounding into a step of
    # either sign (seen on the Zen 4 machine kind: 1.2e-5 apart at lr 1e-2), so they are compared
    # only where |g| is well above that rounding.
    for p, q in zip(params[64].parameters(), params[1].parameters()):
        torch.testing.assert_close(p.grad, q.grad, atol=1e-6, rtol=1e-4)
        big = p.grad.abs() > 1e-6
        torch.testing.assert_close(p[big], q[big], atol=1e-5, rtol=1e-4)
