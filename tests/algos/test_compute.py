"""ComputeMeter counters, analytic FLOPs, budgets."""

import pytest

from algos.batch import Trajectory
from algos.compute import Budget, ComputeMeter, attention_flops, forward_flops, train_step_flops


def test_flops_formula():
    # forward 2 * N * tokens; forward + backward 6 * N * tokens
    assert forward_flops(1000, 10) == 20_000
    assert train_step_flops(1000, 10) == 60_000
    # attention scores, causal: 2 * n_layers * d_model * sum_r T (T + 1)
    # 2 layers, d 64, rows of 3 and 1 tokens: 2 * 2 * 64 * (3*4 + 1*2) = 256 * 14 = 3584
    assert attention_flops(2, 64, [3, 1]) == 3584
    # the same by counting: per layer, query t meets t + 1 keys, 2*d FLOPs for QK and 2*d for AV
    assert attention_flops(2, 64, [3, 1]) == sum(2 * 4 * 64 * (t + 1) for T in (3, 1) for t in range(T))
    assert forward_flops(1000, 10, attention=3584) == 20_000 + 3584
    assert train_step_flops(1000, 10, attention=3584) == 60_000 + 3 * 3584
    with pytest.raises(ValueError, match=r"row_lengths must be >= 0, got \[3, -1\]"):
        attention_flops(2, 64, [3, -1])


def test_attention_flops_with_a_shared_prefix():
    # rows of 6 and 5 ids whose first 2 are computed once: the prefix's 2*3 positions-pairs once,
    # each row's own 6*7 - 2*3 and 5*6 - 2*3: 1 layer, d 16: 2 * 16 * (6 + 36 + 24) = 2112
    assert attention_flops(1, 16, [6, 5], prefix=2) == 2112
    # the same by counting the queries each row computes itself (t >= p) plus the prefix's once
    assert attention_flops(1, 16, [6, 5], prefix=2) == 2 * 2 * 16 * (
        sum(t + 1 for t in range(2)) + sum(t + 1 for T in (6, 5) for t in range(2, T)))
    # one row: sharing changes nothing; prefix 0 is the unshared formula
    assert attention_flops(1, 16, [6], prefix=3) == attention_flops(1, 16, [6])
    assert attention_flops(2, 64, [3, 1], prefix=0) == 3584
    with pytest.raises(ValueError, match=r"prefix=6 must be in \[0, shortest row 5\]"):
        attention_flops(1, 16, [6, 5], prefix=6)


def test_meter_counts_trajectories_and_train_steps():
    m = ComputeMeter()
    m.add_trajectories([
        Trajectory(generated_tokens=10, observation_tokens=30, tool_seconds=1.5, turns=3),
        Trajectory(generated_tokens=4, observation_tokens=6, tool_seconds=0.5, turns=1, masked=True),
    ])
    m.add_forward(100, 50)  # 2 * 100 * 50 = 10_000
    m.add_train_step(100, 50)  # 6 * 100 * 50 = 30_000
    assert (m.rollouts, m.masked_rollouts, m.generated_tokens, m.observation_tokens) == (2, 1, 14, 36)
    assert m.tool_seconds == 2.0 and m.turns == 4
    assert m.train_flops == 40_000
    assert m.metrics()["compute/generated_tokens"] == 14
    restored = ComputeMeter()
    restored.load_state_dict(m.state_dict())
    assert restored == m


def test_meter_counts_a_multi_agent_episode_as_one_rollout():
    from algos.pair_rollout import PairEpisode, PairTrajectory

    m = ComputeMeter()
    a = PairTrajectory(generated_tokens=10, observation_tokens=30, tool_seconds=1.5, turns=3, agent="a")
    b = PairTrajectory(generated_tokens=4, observation_tokens=6, tool_seconds=2.0, turns=2, agent="b", masked=True)
    m.add_trajectories([PairEpisode({"a": a, "b": b}), PairEpisode({"a": a, "b": None})], warmup=True)
    # 2 episodes (one masked: b's trajectory is); tokens 10 + 4 + 10, 30 + 6 + 30; turns summed over
    # the agents that acted, 3 + 2 + 3 = 8; tool seconds the team total of each episode (the latest
    # agent's copy of it), 2.0 + 1.5 = 3.5, not every agent's copy summed (1.5 + 2.0 + 1.5 = 5.0)
    assert (m.rollouts, m.warmup_rollouts, m.masked_rollouts) == (2, 2, 1)
    assert (m.generated_tokens, m.observation_tokens, m.tool_seconds, m.turns) == (24, 66, 3.5, 8)


def test_budget_stops_at_equal_cost():
    """GRPO with G=8 x 1 task and PPO with G=1 x 8 tasks spend the same rollout budget per update."""
    budget = Budget("rollouts", 16)
    m = ComputeMeter()
    m.add_trajectories([Trajectory()] * 8)
    assert not budget.exhausted(m) and budget.fraction(m) == 0.5
    m.add_trajectories([Trajectory()] * 8)
    assert budget.exhausted(m)
    with pytest.raises(ValueError, match="allowed: rollouts, generated_tokens"):
        Budget("episodes", 10)
    with pytest.raises(ValueError, match="must be > 0"):
        Budget("rollouts", 0)


def test_trainer_counts_analytic_flops():
    """GRPO (1 epoch, 1 minibatch): the old log-probs come from the training forward, so
    FLOPs = 6 * N * tokens + 3 * A. PPO (separate critic, 2 epochs): old pass
    2 * (N + Nc) * tokens + 2 A plus 2 x (6 * (N + Nc) * tokens + 3 * 2 A); A = the attention
    term of one model over the two rows (6 and 5 tokens, 1 layer, d 16): 2 * 16 * (42 + 30) = 2304."""
    import torch

    from algos.batch import ContextBuilder, collate
    from algos.policy import PolicyModel, PolicyShape, ValueModel, count_params
    from algos.trainer import make_trainer
    from experiments.runtime.schema import AlgoConfig

    b = ContextBuilder(max_len=32)
    b.start_segment([10, 11], "reset")
    for w in (12, 2):
        b.add_sampled(w, 0.0, 0)
    b.end_action(False).reward = 1.0
    b.seg.end = "terminated"
    win = Trajectory(segments=b.segments, train_reward=1.0, terminated=True, verified=1, group_id=0)
    b = ContextBuilder(max_len=32)
    b.start_segment([10, 11], "reset")
    b.add_sampled(2, 0.0, 0)
    b.end_action(False)
    b.seg.end = "terminated"
    loss = Trajectory(segments=b.segments, train_reward=0.0, terminated=True, verified=0, group_id=0)
    tokens = int(collate([win, loss]).valid.sum())  # 6 + 5 = 11 real tokens
    assert tokens == 11
    shape = PolicyShape(vocab_size=50, d_model=16, n_layers=1, n_heads=2, max_len=32, critic="separate")
    torch.manual_seed(0)
    policy, critic = PolicyModel(shape), ValueModel(shape)
    n, nc = count_params(policy), count_params(critic)
    a = 2 * 1 * 16 * (6 * 7 + 5 * 6)
    assert a == 2304
    grpo = make_trainer("grpo", AlgoConfig(name="grpo", epochs=1, minibatches=1), policy)
    grpo.update([win, loss])
    assert grpo.meter.train_flops == 6 * n * tokens + 3 * a
    ppo = make_trainer("ppo", AlgoConfig(name="ppo", epochs=2, minibatches=1), policy, critic)
    ppo.update([win, loss])
    assert ppo.meter.train_flops == 2 * (n + nc) * tokens + 2 * a + 2 * (6 * (n + nc) * tokens + 3 * 2 * a)
    # a KL reference adds one forward of its own: 2 * N * tokens + A
    ref = make_trainer("grpo", AlgoConfig(name="grpo", epochs=1, minibatches=1, kl_coef=0.1), policy,
                       reference=PolicyModel(shape))
    ref.update([win, loss])
    assert ref.meter.train_flops == 6 * n * tokens + 3 * a + 2 * n * tokens + a
