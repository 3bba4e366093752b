"""The shared update (algos.trainer): logged numbers independent of how the work is split, the
approx-KL diagnostic, long sequence ratios, the three typed steps and the registries."""

import ast
import copy
import math
from pathlib import Path

import pytest
import torch

from algos.batch import ContextBuilder, Trajectory, collate
from algos.policy import PolicyModel, PolicyShape, shift_logprobs
from algos.registry import TRAINERS, make_trainer, register
from algos.trainer import SPLIT_COST_KEYS, Trainer, frozen_copy
from experiments.runtime.schema import AlgoConfig
from synthetic_trajectories import EOS, make_traj

torch.set_num_threads(1)


def _model(seed=0, critic="none", max_len=256):
    torch.manual_seed(seed)
    return PolicyModel(PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=max_len, critic=critic))


def _trajs():
    """12 rows: segments of 1-3 turns, two groups of 3 with mixed rewards."""
    shapes = [([2, 1], 1.0), ([1, 1, 1], 0.0), ([3], 1.0), ([1, 2], 0.0), ([2], 1.0), ([1, 1, 1], 0.0)]
    return [make_traj(turns, r, group=i // 3, seed=10 + i) for i, (turns, r) in enumerate(shapes)]


def _run(name, micro, minibatches=1, lr=1e-2, **kw):
    """One update from the same start; returns (metrics, policy)."""
    critic = "head" if name == "ppo" else "none"
    policy = _model(critic=critic)
    reference = frozen_copy(_model(seed=3, critic=critic))
    fields = dict(name=name, epochs=2, minibatches=minibatches, micro_batch_rows=micro, lr=max(lr, 1e-3), entropy_coef=0.01,
                  kl_coef=0.1, off_policy_correction="decoupled", is_cap=2.0)
    if name == "ppo":
        fields.update(group_size=1, gamma=0.9, lam=0.8)
    fields.update(kw)
    algo = AlgoConfig(**fields)
    algo.lr = lr  # set after validation: lr 0 (no step moves the weights) is a test-only setting
    trainer = make_trainer(name, algo, policy, reference=reference)
    metrics = trainer.update(copy.deepcopy(_trajs()))
    metrics.pop("train/update_seconds")
    return metrics, policy


SPLIT_KEYS = ("train/policy_loss", "train/entropy", "train/clip_frac", "train/ratio_mean", "train/approx_kl",
              "train/kl_ref", "train/is_weight", "train/grad_norm")


@pytest.mark.parametrize("name", ["grpo", "ppo"])
def test_logged_metrics_do_not_depend_on_micro_batch_rows(name):
    """The logged dict of one update is the same for micro_batch_rows 1, 7 and all rows
    (12): losses are each optimizer step's full loss, per-token statistics are token-weighted."""
    runs = {micro: _run(name, micro) for micro in (1, 7, 12)}
    ref_metrics, ref_policy = runs[12]
    keys = SPLIT_KEYS + (("train/value_loss", "critic/explained_variance_in_batch") if name == "ppo" else ())
    assert set(keys) <= set(ref_metrics)
    assert ref_metrics["train/rows"] == 12
    for micro in (1, 7):
        metrics, policy = runs[micro]
        assert metrics.keys() == ref_metrics.keys()
        for key, value in ref_metrics.items():
            if key in SPLIT_COST_KEYS:  # how the work was laid out, not a number of the update
                continue
            assert metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), (micro, key)
        for p, q in zip(policy.parameters(), ref_policy.parameters()):
            torch.testing.assert_close(p, q, atol=1e-5, rtol=1e-4)


def test_per_token_statistics_do_not_depend_on_minibatches():
    """With lr 0 every forward sees the same weights, so the token-weighted statistics of 1, 2 or
    3 minibatches (1, 2 or 3 optimizer steps per epoch) are the same numbers."""
    runs = [_run("grpo", micro=5, minibatches=n, lr=0.0)[0] for n in (1, 2, 3)]
    for key in ("train/entropy", "train/ratio_mean", "train/clip_frac", "train/approx_kl", "train/kl_ref",
                "train/is_weight"):
        for metrics in runs[1:]:
            assert metrics[key] == pytest.approx(runs[0][key], rel=1e-5, abs=1e-6), key
    assert runs[0]["train/ratio_mean"] == pytest.approx(1.0) and runs[0]["train/clip_frac"] == 0.0


@pytest.mark.parametrize("micro", [1, 64])
def test_policy_loss_is_the_full_loss_of_the_step(micro):
    """Rewards [1, 0] in one group: A = [+1, -1] (population std, eps 0); 1 epoch, ratio 1, so the
    token-mean loss is -(4 * 1 + 6 * (-1)) / 10 = 0.2 (4 and 6 action tokens), whatever the split."""
    trajs = [make_traj([2], 1.0, seed=1), make_traj([3], 0.0, seed=2)]
    algo = AlgoConfig(name="grpo", epochs=1, micro_batch_rows=micro, adv_eps=0.0, off_policy_correction="none")
    metrics = make_trainer("grpo", algo, _model()).update(trajs)
    assert metrics["train/action_tokens"] == 10
    assert metrics["train/policy_loss"] == pytest.approx(0.2, abs=1e-6)


def test_approx_kl_is_r_minus_1_minus_log_r_of_the_update():
    """With 2 epochs the first epoch's forwards see pi_old (r = 1: 0) and the second's
    see pi_1 (the weights after one step), so the logged value is mean_t(r - 1 - log r) / 2 over
    the loss tokens, r = pi_1 / pi_old, computed here from the two models independently."""
    trajs = [make_traj([2, 1], 1.0, seed=1), make_traj([3], 0.0, seed=2), make_traj([1, 1], 1.0, seed=3)]
    fields = dict(name="grpo", lr=0.2, off_policy_correction="none", clip_low=0.9, clip_high=5.0)
    old = _model()
    one_step = _model()
    make_trainer("grpo", AlgoConfig(epochs=1, **fields), one_step).update(copy.deepcopy(trajs))
    metrics = make_trainer("grpo", AlgoConfig(epochs=2, **fields), _model()).update(copy.deepcopy(trajs))
    batch = collate(trajs)
    m = batch.action_mask > 0
    with torch.no_grad():
        log_r = (shift_logprobs(one_step(batch.tokens)[0], batch.tokens) - shift_logprobs(old(batch.tokens)[0], batch.tokens))[m]
    right = float((log_r.exp() - 1 - log_r).mean()) / 2
    reversed_k3 = float(((-log_r).exp() - 1 + log_r).mean()) / 2  # 1/r - 1 + log r: the old formula
    assert abs(right - reversed_k3) > 1e-2 * right  # the step is large enough to tell them apart
    assert metrics["train/approx_kl"] == pytest.approx(right, rel=1e-3)


def _long_action_traj(reward, n_tokens=200, behavior_logp=-10.0):
    b = ContextBuilder(max_len=256)
    b.start_segment([10, 11], "reset")
    for i in range(n_tokens - 1):
        b.add_sampled(5 + i % 30, behavior_logp, 0)
    b.add_sampled(EOS, behavior_logp, 0)
    b.end_action(False).reward = reward
    b.seg.end = "terminated"
    return Trajectory(segments=b.segments, train_reward=reward, terminated=True, verified=int(reward))


@pytest.mark.parametrize("ratio", ["sequence", "sequence-norm", "token"])
def test_sequence_ratio_of_a_200_token_action_stays_finite(ratio):
    """Behavior log-probs -10 vs recomputed ~-3.9 per token: the summed log-ratio of a
    200-token action is ~ +1200, exp of which is inf in float32. Clamped, the loss, gradient and
    weights stay finite."""
    policy = _model()
    algo = AlgoConfig(name="grpo", ratio=ratio, off_policy_correction="behavior-as-old", dual_clip=3.0, adv_eps=0.0)
    metrics = make_trainer("grpo", algo, policy).update([_long_action_traj(1.0), _long_action_traj(0.0)])
    assert metrics["train/action_tokens"] == 400
    for key in ("train/policy_loss", "train/ratio_mean", "train/grad_norm", "train/approx_kl"):
        assert math.isfinite(metrics[key]), (key, metrics[key])
    assert all(torch.isfinite(p).all() for p in policy.parameters())


def test_update_is_prepare_advantages_optimize():
    """The three typed steps called by hand give the same metrics and weights as ``update``."""
    trajs = [make_traj([2, 1], 1.0, seed=1), make_traj([3], 0.0, seed=2)]
    algo = AlgoConfig(name="ppo", group_size=1, epochs=2, minibatches=2, lr=1e-2)
    a, b = _model(critic="head"), _model(critic="head")
    whole = make_trainer("ppo", algo, a).update(copy.deepcopy(trajs))
    trainer = make_trainer("ppo", algo, b)
    batch, inputs = trainer.prepare_batch(copy.deepcopy(trajs))
    assert inputs.old_values is not None and inputs.ref_logp is None and not inputs.old_logp_from_first_epoch
    adv = trainer.advantages(batch, inputs)
    assert adv.tokens.shape == batch.tokens.shape and adv.layout.mask.shape[0] == 2
    steps = {**inputs.metrics, **adv.metrics, **trainer.optimize(batch, inputs, adv)}
    whole.pop("train/update_seconds")
    assert steps.keys() == whole.keys()
    for key, value in whole.items():
        assert steps[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)
    # update_record: the same update, with what its steps produced
    c = _model(critic="head")
    record = make_trainer("ppo", algo, c).update_record(copy.deepcopy(trajs))
    assert record.metrics.keys() - {"train/update_seconds"} == whole.keys()
    assert torch.equal(record.inputs.old_logp, inputs.old_logp) and torch.equal(record.advantages.tokens, adv.tokens)
    assert torch.equal(record.batch.tokens, batch.tokens)


@pytest.mark.parametrize("minibatches", [1, 2])
def test_old_logprobs_are_the_start_weights_whether_fused_or_not(minibatches):
    """GRPO with one minibatch takes the old log-probs from epoch 0's forwards (fused); with two
    from a separate pass. Either way they are the start model's log-probs at the temperature."""
    trajs = [make_traj([2, 1], 1.0, seed=1), make_traj([3], 0.0, seed=2)]
    start = _model()
    algo = AlgoConfig(name="grpo", epochs=2, minibatches=minibatches, lr=1e-2)
    record = make_trainer("grpo", algo, _model(), temperature=0.7).update_record(trajs)
    assert record.inputs.old_logp_from_first_epoch == (minibatches == 1)
    batch = record.batch
    m = batch.action_mask > 0
    with torch.no_grad():
        expected = shift_logprobs(start(batch.tokens)[0], batch.tokens, 0.7)
    torch.testing.assert_close(record.inputs.old_logp[m], expected[m], atol=1e-5, rtol=1e-5)


def test_nothing_to_train_is_a_skipped_update():
    trainer = make_trainer("grpo", AlgoConfig(name="grpo"), _model())
    masked = make_traj([1], 0.0, masked=True)
    assert trainer.prepare_batch([masked]) is None
    metrics = trainer.update([masked])
    assert metrics == {"train/masked_trajectories": 1, "train/trajectories": 0, "train/skipped": 1}
    assert trainer.updates_done == 1
    record = trainer.update_record([masked])
    assert record.batch is None and record.metrics["train/skipped"] == 1 and trainer.updates_done == 2


def test_registries_name_the_valid_choices():
    """The trainer's own registries name the valid choices (the config schema rejects the same
    names earlier; the bad value is set after validation to reach the trainer)."""

    def bad(name, field, value, **kw):
        algo = AlgoConfig(name=name, **kw)
        setattr(algo, field, value)
        return algo

    with pytest.raises(ValueError, match=r"algo.ratio='seq' unknown; allowed: token, sequence, sequence-norm"):
        make_trainer("grpo", bad("grpo", "ratio", "seq"), _model())
    with pytest.raises(ValueError, match=r"algo.off_policy_correction='vtrace' unknown; allowed: decoupled, none, "
                                         r"behavior-as-old"):
        make_trainer("grpo", bad("grpo", "off_policy_correction", "vtrace"), _model())
    with pytest.raises(ValueError, match=r"algo.value_level='step' unknown; allowed: token, turn"):
        make_trainer("ppo", bad("ppo", "value_level", "step"), _model(critic="head"))
    with pytest.raises(ValueError, match=r"algo 'sac' unknown; allowed: gigpo, grouped_value, grpo, grpo_process, ppo, ppo_ctde, ppo_independent, ppo_long, ppo_segment_terminal, rloo"):
        make_trainer("sac", AlgoConfig(name="grpo"), _model())


def test_duplicate_registration_raises():
    assert {"grpo", "ppo"} <= set(TRAINERS)
    with pytest.raises(ValueError, match="trainer 'grpo' is already registered"):
        @register("grpo")
        class Other(Trainer):
            pass
    assert TRAINERS["grpo"].__name__ == "GroupTrainer"


def _imported_modules(module) -> set[str]:
    tree = ast.parse(Path(module.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def test_trainer_module_does_not_import_the_algorithms():
    """The base class and the registry import neither algorithm (no import cycle); the registry is
    a leaf (imports nothing from algos)."""
    import algos.registry
    import algos.trainer

    assert not _imported_modules(algos.trainer) & {"algos.grpo", "algos.ppo"}
    assert not {m for m in _imported_modules(algos.registry) if m.startswith("algos")}


def test_padding_efficiency_counts_real_tokens_over_computed_positions():
    """GRPO, 1 epoch x 1 minibatch (old log-probs fused into the one forward): rows of a few
    tokens fit one length bucket (the 128-position slice overhead exceeds any saving), so
    efficiency = real tokens / (rows x longest row); one row per micro-batch computes no padding."""
    trajs = [make_traj([2, 1], 1.0, seed=1), make_traj([3], 0.0, seed=2), make_traj([1], 1.0, seed=3)]
    algo = dict(name="grpo", epochs=1, minibatches=1, lr=1e-2)
    record = make_trainer("grpo", AlgoConfig(**algo, micro_batch_rows=64), _model()).update_record(copy.deepcopy(trajs))
    lengths = record.batch.valid.sum(1)
    assert len(set(lengths.tolist())) > 1  # ragged rows, so padding is real
    expected = int(lengths.sum()) / (len(lengths) * int(lengths.max()))
    assert record.metrics["train/padding_efficiency"] == pytest.approx(expected)
    one = make_trainer("grpo", AlgoConfig(**algo, micro_batch_rows=1), _model()).update(copy.deepcopy(trajs))
    assert one["train/padding_efficiency"] == 1.0
    assert record.metrics["train/max_row_len"] == int(lengths.max())
