"""The rollout engine and the demo layout record each turn's anchor state key (GiGPO): the
``info["state_key"]`` of the state the action was chosen in, -1 when the env gives none."""

import zlib

import gymnasium
import torch

import envs
from algos.policy import PolicyModel, PolicyShape
from algos.requests import make_requests
from algos.recording import demo_to_trajectory, state_key_of
from algos.rollout import RolloutEngine
from envs.tokenizer import get_tokenizer

torch.set_num_threads(1)
TOK = get_tokenizer()


class KeyedEnv(gymnasium.Wrapper):
    """Adds ``info["state_key"]`` = a hash of the observation (above 2**63, like an unsigned
    64-bit hash can be) and logs the keys it gave per episode seed."""

    def __init__(self, env):
        super().__init__(env)
        self.log: dict[int, list[int]] = {}

    @staticmethod
    def key(obs: str) -> int:
        return 2**63 + zlib.crc32(obs.encode())

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        self.keys = self.log[seed] = [self.key(obs)]
        return obs, {**info, "state_key": self.keys[-1]}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.keys.append(self.key(obs))
        return obs, reward, terminated, truncated, {**info, "state_key": self.keys[-1]}


class UnkeyedEnv(gymnasium.Wrapper):
    """Removes ``info["state_key"]`` (an env that gives no anchor keys)."""

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {k: v for k, v in info.items() if k != "state_key"}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {k: v for k, v in info.items() if k != "state_key"}


def _collect(keyed: bool):
    torch.manual_seed(0)
    model = PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_len=256)).eval()
    engine = RolloutEngine(envs.LONG_HORIZON_ID, num_envs=2, max_len=256, max_action_tokens=4)
    engine.envs = [KeyedEnv(e) if keyed else UnkeyedEnv(e) for e in engine.envs]
    trajs = engine.collect(model, make_requests(2, 2, seed=0, task_indices=[0, 1]),
                           generator=torch.Generator().manual_seed(0))
    log = {seed: keys for e in engine.envs if keyed for seed, keys in e.log.items()}
    return trajs, log


def test_engine_records_the_key_of_the_state_each_action_was_chosen_in():
    trajs, log = _collect(keyed=True)
    assert max(tr.turns for tr in trajs) >= 2
    for tr in trajs:
        assert tr.turns >= 1 and len(tr.state_keys) == tr.turns
        # turn k was chosen after the reset (k = 0) or after step k - 1: key k of the env's log
        assert tr.state_keys == log[tr.seed][: tr.turns]


def test_engine_without_state_keys_records_minus_one():
    trajs, _ = _collect(keyed=False)
    assert all(tr.state_keys == [-1] * tr.turns for tr in trajs)


def test_demo_layout_records_state_keys():
    observations = ["view", "run_tests", "submit"]
    infos = [{"state_key": 11}, {}, {"state_key": 33}]  # the second state has no key
    tr = demo_to_trajectory(observations, ["view", "submit"], [0.0, 1.0], infos, True, False, max_len=64,
                            max_action_tokens=4)
    assert tr.state_keys == [11, -1]
    assert state_key_of({"state_key": 2**64 - 1}) == 2**64 - 1 and state_key_of({}) == -1



def _demo_groups(env_id, agents_module, compression):
    """2 tasks x 3 members of a noisy oracle (mistake rate 0.3) on ``env_id``, keyed states, laid
    out like rollouts (``demo_to_trajectory``)."""
    import importlib

    agent_cls = importlib.import_module(agents_module).NoisyOracleAgent
    env = KeyedEnv(envs.make(env_id, compression=compression))
    trajs = []
    for task in (0, 1):
        for member in range(3):
            seed = 100 * task + member
            agent = agent_cls(mistake_rate=0.3)
            obs, info = env.reset(seed=seed, options={"task_index": task, "split": "train"})
            agent.reset(env, seed)
            observations, actions, rewards, infos, done = [obs], [], [], [info], False
            while not done:
                action = agent.act(obs, info)
                obs, reward, terminated, truncated, info = env.step(action)
                observations.append(obs); actions.append(action); rewards.append(reward); infos.append(info)
                done = terminated or truncated
            trajs.append(demo_to_trajectory(observations, actions, rewards, infos, terminated, truncated,
                                            max_len=256, max_action_tokens=16, group_id=task))
    return trajs


def test_new_trainers_update_on_real_episodes_of_both_envs():
    """Noisy-oracle episodes of each env (compression every 4 turns, so trajectories span several
    segments; keyed states), one update per new trainer: the steps line up with the turn-level
    points, the numbers are finite and the policy moves."""
    import copy
    import math

    from algos.batch import collate
    from algos.registry import make_trainer
    from algos.steps import step_inputs, step_layout
    from experiments.runtime.schema import AlgoConfig

    torch.manual_seed(0)
    model = PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_len=256))
    compression = dict(strategy="structured_summary", trigger="turns", every_turns=4)
    for env_id, agents_module in ((envs.BUGFIX_ID, "envs.bugfix.agents"), (envs.LONG_HORIZON_ID, "envs.long_horizon_agents")):
        trajs = _demo_groups(env_id, agents_module, compression)
        assert any(len(t.segments) > 1 for t in trajs), env_id
        layout = step_layout(collate(trajs))
        steps = step_inputs(trajs)
        assert layout.mask.sum(1).tolist() == steps.mask.sum(1).tolist() == [t.turns for t in trajs]
        torch.testing.assert_close(layout.rewards[layout.mask], steps.rewards[steps.mask])
        for name in ("rloo", "gigpo", "grpo_process"):
            policy = copy.deepcopy(model)
            algo = AlgoConfig(name=name, off_policy_correction="none", lr=1e-2, **({"gamma": 0.9} if name == "gigpo" else {}))
            metrics = make_trainer(name, algo, policy).update(copy.deepcopy(trajs))
            assert metrics["train/trajectories"] == 6, (env_id, name)
            assert all(math.isfinite(v) for v in metrics.values() if isinstance(v, float)), (env_id, name, metrics)
            if name == "gigpo":
                assert metrics["train/anchor_hit_rate"] > 0  # the reset state is shared by a group's members
            if metrics["train/adv_abs_mean"] > 0:
                assert any(not torch.equal(p, q) for p, q in zip(policy.parameters(), model.parameters()))
