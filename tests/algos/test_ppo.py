"""PPO: GAE across compression boundaries (C16/C17), truncation bootstrap, turn-level critic,
value warm-up, critic-only passes (``algo.critic_epochs``), updates and critic diagnostics."""

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algos.batch import ContextBuilder, Trajectory, collate
from algos.compute import attention_flops
from algos.policy import PolicyModel, PolicyShape, ValueModel, count_params, shift_values
from algos.decisions import gae_layout, on_sampled_tokens
from algos.advantages import gae
from algos.trainer import frozen_copy, make_trainer, value_positions
from experiments.runtime.schema import AlgoConfig, ConfigError
from synthetic_trajectories import EOS, compressed_traj, make_traj

torch.set_num_threads(1)


def raw_values():
    """Critic outputs per position [R=2, T]: V is read at the position preceding an action token.
    V(s) of segment 0's action = raw[0, 2] = 0.6; V(compressed context) = raw[1, 2] = 0.8."""
    v = torch.zeros(2, 6)
    v[0, 2] = 0.6
    v[1, 2] = 0.8
    v[1, 5] = 0.5  # V(next state) after a truncation (read at the final SEP)
    return v


def test_gae_bootstraps_across_compression_from_the_compressed_context():
    """C16/C17 numbers: reward 0, V(s)=0.6, V(s')=0.8, gamma 0.9.
    continuing: delta = 0 + 0.9 * 0.8 - 0.6 = +0.12; mislabelled terminal: delta = 0 - 0.6 = -0.6."""
    batch = collate([compressed_traj()])
    lay = gae_layout(batch, raw_values(), "token")
    assert lay.mask.tolist() == [[True, True]]
    torch.testing.assert_close(lay.values, torch.tensor([[0.6, 0.8]]))
    torch.testing.assert_close(lay.next_values, torch.tensor([[0.8, 0.0]]))  # V(compressed ctx), then terminal
    assert lay.terminated.tolist() == [[False, True]] and lay.truncated.tolist() == [[False, False]]
    adv, ret = gae(lay.rewards, lay.values, lay.next_values, lay.terminated, lay.truncated,
                   gamma=0.9, lam=0.0, mask=lay.mask)
    # segment 1: delta = 1 - 0.8 = 0.2
    torch.testing.assert_close(adv, torch.tensor([[0.12, 0.2]]))
    # lam = 1: the recursion continues into the next segment: 0.12 + 0.9 * 0.2 = 0.30
    adv1, _ = gae(lay.rewards, lay.values, lay.next_values, lay.terminated, lay.truncated,
                  gamma=0.9, lam=1.0, mask=lay.mask)
    torch.testing.assert_close(adv1, torch.tensor([[0.30, 0.2]]))

    # the C17 failure mode, built directly: the compression boundary (point 0) labelled terminal
    wrong_terminated = lay.terminated.clone()
    wrong_terminated[0, 0] = True
    adv_w, _ = gae(lay.rewards, lay.values, lay.next_values, wrong_terminated, lay.truncated,
                   gamma=0.9, lam=0.0, mask=lay.mask)
    torch.testing.assert_close(adv_w, torch.tensor([[-0.6, 0.2]]))  # sign flipped: +0.12 -> -0.6


def test_points_are_numbered_per_trajectory_across_its_segments():
    """Two trajectories of 2 segments each (rows 0-1 and 2-3), one action at index 3 per segment:
    the owner index restarts at 0 for the second trajectory and continues across a compression."""
    batch = collate([compressed_traj(), compressed_traj()])
    lay = gae_layout(batch, torch.zeros(4, 6), "token")
    assert batch.row_traj.tolist() == [0, 0, 1, 1]
    assert lay.owner[:, 3].tolist() == [0, 1, 0, 1]
    assert lay.rows.tolist() == [[0, 1], [2, 3]] and lay.cols.tolist() == [[3, 3], [3, 3]]


def test_truncation_bootstraps_from_next_state_value():
    """Truncated last action: delta = 1 + 0.9 * V(next)=0.5 - 0.8 = 0.65; the recursion stops there."""
    batch = collate([compressed_traj("truncated")])
    assert batch.bootstrap_index.tolist() == [-1, 5]
    lay = gae_layout(batch, raw_values(), "token")
    assert lay.truncated.tolist() == [[False, True]] and lay.terminated.tolist() == [[False, False]]
    torch.testing.assert_close(lay.next_values, torch.tensor([[0.8, 0.5]]))
    adv, _ = gae(lay.rewards, lay.values, lay.next_values, lay.terminated, lay.truncated,
                 gamma=0.9, lam=0.0, mask=lay.mask)
    torch.testing.assert_close(adv, torch.tensor([[0.12, 0.65]]))


def test_turn_level_layout_one_point_per_tool_call():
    """Two turns of 3 sampled tokens each; rewards 0.25 then 1: one decision point per turn, at
    the first sampled token, value read at the SEP before it, reward of the whole turn."""
    b = ContextBuilder(max_len=32)
    b.start_segment([10], "reset")  # [BOS 10 SEP] indices 0..2
    for w in (20, 21, EOS):
        b.add_sampled(w, 0.0, 0)  # 3..5
    b.end_action(False).reward = 0.25
    b.add_observation([12])  # 6, SEP 7
    for w in (22, 23, EOS):
        b.add_sampled(w, 0.0, 0)  # 8..10
    b.end_action(False).reward = 1.0
    b.seg.end = "terminated"
    batch = collate([Trajectory(segments=b.segments, terminated=True)])
    raw = torch.arange(11, dtype=torch.float32)[None] / 10  # V at position p = p / 10
    lay = gae_layout(batch, raw, "turn")
    assert lay.cols[0].tolist() == [3, 8]
    torch.testing.assert_close(lay.values, torch.tensor([[0.2, 0.7]]))
    torch.testing.assert_close(lay.rewards, torch.tensor([[0.25, 1.0]]))
    torch.testing.assert_close(lay.next_values, torch.tensor([[0.7, 0.0]]))
    # every sampled token belongs to its turn's point: tokens 3..5 -> point 0, 8..10 -> point 1
    assert lay.owner[0].tolist() == [-1, -1, -1, 0, 0, 0, -1, -1, 1, 1, 1]
    # a point's advantage reaches all of its turn's tokens
    tok_adv = on_sampled_tokens(torch.tensor([[0.5, -2.0]]), lay, batch)
    assert tok_adv[0].tolist() == [0, 0, 0, 0.5, 0.5, 0.5, 0, 0, -2.0, -2.0, -2.0]
    tok = gae_layout(batch, raw, "token")
    assert tok.mask.sum() == 6 and tok.rewards[0, 2] == 0.25 and tok.rewards[0, 5] == 1.0
    assert tok.owner[0].tolist() == [-1, -1, -1, 0, 1, 2, -1, -1, 3, 4, 5]


def _random_traj(spec):
    """``spec``: segments, each a list of turns ``(n_words, capped, reward)``; a capped turn gets
    an env-written EOS after its words."""
    b = ContextBuilder(max_len=256)
    for k, turns in enumerate(spec):
        b.start_segment([10 + k], "reset" if k == 0 else "compression")
        for j, (n_words, capped, reward) in enumerate(turns):
            for w in range(n_words):
                b.add_sampled(20 + w, 0.0, 0)
            if not capped:
                b.add_sampled(EOS, 0.0, 0)
            b.end_action(capped).reward = reward
            if j < len(turns) - 1:
                b.add_observation([12, 13])
        b.seg.end = "compressed"
    b.seg.end = "terminated"
    return Trajectory(segments=b.segments, terminated=True)


TURN = st.tuples(st.integers(1, 3), st.booleans(), st.sampled_from([0.0, 0.25, 1.0]))
TRAJ = st.lists(st.lists(TURN, min_size=1, max_size=3), min_size=1, max_size=3)


@settings(max_examples=25, deadline=None)
@given(specs=st.lists(TRAJ, min_size=1, max_size=3))
def test_layout_owners_and_rewards_match_a_loop_over_turns(specs):
    """Vectorized decision-point bookkeeping vs a loop over each trajectory's segments and turns:
    turn level numbers the turns, token level the sampled tokens; the turn's reward sits on the
    point owning its last sampled token."""
    trajs = [_random_traj(spec) for spec in specs]
    batch = collate(trajs)
    for level in ("token", "turn"):
        lay = gae_layout(batch, torch.zeros(batch.tokens.shape), level)
        owner = torch.full(batch.tokens.shape, -1, dtype=torch.long)
        rewards = torch.zeros(lay.mask.shape)
        row = 0
        for i, tr in enumerate(trajs):
            k = -1
            for seg in tr.segments:
                for turn in seg.turns:
                    if level == "turn":
                        k += 1
                    for t in range(turn.start, turn.end + 1):
                        if level == "token":
                            k += 1
                        owner[row, t] = k
                    rewards[i, k] += turn.reward
                row += 1
            assert int(lay.mask[i].sum()) == k + 1
        assert torch.equal(lay.owner, owner), level
        torch.testing.assert_close(lay.rewards, rewards)


def _algo(**kw):
    base = dict(name="ppo", group_size=1, off_policy_correction="none", lr=1e-2, epochs=2, minibatches=1)
    base.update(kw)
    return AlgoConfig(**base)


def _trajs():
    return [make_traj([2, 1], 1.0, group=i, seed=i) if i % 2 else make_traj([3], 0.0, group=i, seed=i) for i in range(4)]


def _models(critic):
    torch.manual_seed(0)
    shape = PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=256, critic=critic)
    return PolicyModel(shape), (ValueModel(shape) if critic == "separate" else None)


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_ppo_update_changes_policy_and_reports_critic_diagnostics(critic):
    policy, value = _models(critic)
    before = copy.deepcopy(policy)
    trainer = make_trainer("ppo", _algo(), policy, value)
    metrics = trainer.update(_trajs())
    assert any(not torch.equal(p, q) for p, q in zip(policy.parameters(), before.parameters()))
    for key in ("train/value_loss", "critic/explained_variance_in_batch", "critic/explained_variance_heldout",
                "train/clip_frac", "train/entropy", "train/agg_weight_shift"):
        assert key in metrics, key
    assert trainer.meter.train_flops > 0


@pytest.mark.parametrize("critic", ["head", "separate"])
def test_value_warmup_trains_only_the_critic(critic):
    """During the warm-up no policy term moves the policy: not the clipped loss, not an
    entropy bonus, not a k1 KL (whose gradient is non-zero even at pi = ref), not weight decay."""
    policy, value = _models(critic)
    before = copy.deepcopy(policy)
    algo = _algo(value_warmup_updates=1, entropy_coef=0.1, kl_coef=0.5, kl_kind="k1", weight_decay=0.1)
    trainer = make_trainer("ppo", algo, policy, value, reference=frozen_copy(policy))
    metrics = trainer.update(_trajs())
    assert metrics["train/policy_frozen"] == 1.0 and metrics["train/value_loss"] > 0
    for (name, p), q in zip(policy.named_parameters(), before.parameters()):
        if name.startswith("value_head"):
            assert not torch.equal(p, q)
        else:
            assert torch.equal(p, q), name
    if value is not None:
        assert metrics["train/grad_norm"] > 0  # the separate critic trained
    metrics = trainer.update(_trajs())  # warm-up over: the policy moves
    assert metrics["train/policy_frozen"] == 0.0
    assert not torch.equal(policy.lm_head.weight, before.lm_head.weight)


def test_ppo_needs_a_critic():
    policy, _ = _models("none")
    with pytest.raises(ValueError, match="needs a critic"):
        make_trainer("ppo", _algo(), policy)


# ----- algo.critic_epochs: critic-only passes after the joint epochs (value loss alone, the critic's forward alone)
def _updated(critic, **kw):
    """A PPO update on ``_trajs()`` with ``_algo(**kw)`` (two minibatches of two-row slices unless
    ``kw`` says otherwise): ``(policy, critic, trainer, metrics)``."""
    policy, value = _models(critic)
    trainer = make_trainer("ppo", _algo(**{"minibatches": 2, "micro_batch_rows": 2, **kw}), policy, value)
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


def test_compression_boundaries_are_the_points_before_a_segment_change():
    """rows [[0, 0, 1, 1, 2], [3, 3, 3, pad, pad]]: the row changes after points (0, 1) and (0, 3);
    the padding after trajectory 1's last point is not a boundary."""
    from algos.ppo import compression_boundaries

    rows = torch.tensor([[0, 0, 1, 1, 2], [3, 3, 3, 0, 0]])
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    assert compression_boundaries(rows, mask).tolist() == [[0, 1], [0, 3]]


def test_segment_terminal_ppo_labels_the_compression_terminal_and_ppo_does_not():
    """On the C17 fixture (reward 0, V(s) = 0.6, V(compressed context) = 0.8, gamma 0.9, lambda 0):
    ppo's advantage at the compression is 0 + 0.9 * 0.8 - 0.6 = +0.12; ppo_segment_terminal's is
    0 - 0.6 = -0.6; the final point (1 - 0.8 = 0.2) is the same for both."""
    batch = collate([compressed_traj()])
    out = {}
    for name in ("ppo", "ppo_segment_terminal"):
        algo = AlgoConfig(name=name, gamma=0.9, lam=0.0)
        policy = PolicyModel(PolicyShape(vocab_size=64, d_model=16, n_layers=1, n_heads=2, max_len=32, critic="head"))
        lay = make_trainer(name, algo, policy).gae_inputs(batch, raw_values())
        out[name], _ = gae(lay.rewards, lay.values, lay.next_values, lay.terminated, lay.truncated,
                           gamma=0.9, lam=0.0, mask=lay.mask)
        assert lay.terminated.tolist() == ([[False, True]] if name == "ppo" else [[True, True]])
    torch.testing.assert_close(out["ppo"], torch.tensor([[0.12, 0.2]]))
    torch.testing.assert_close(out["ppo_segment_terminal"], torch.tensor([[-0.6, 0.2]]))
