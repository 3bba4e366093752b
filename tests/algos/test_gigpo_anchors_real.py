"""GiGPO on real BugFix-v2 / LongHorizon-v1 episodes: the envs' ``info["state_key"]`` makes step
groups that are not all singletons (``train/anchor_hit_rate > 0``), so GiGPO's advantages differ from
GRPO's; with the keys removed (-1, what every env gave before) GiGPO equals GRPO again."""

import math

import pytest
import torch

import envs
from algos.batch import collate
from algos.policy import PolicyModel, PolicyShape
from algos.registry import make_trainer
from algos.requests import make_requests
from algos.recording import demo_to_trajectory
from algos.rollout import RolloutEngine
from algos.update import UpdateInputs
from envs.tokenizer import get_tokenizer
from experiments.runtime.schema import AlgoConfig

torch.set_num_threads(1)
TOK = get_tokenizer()
TASK0 = {"task_index": 0, "split": "train"}
# BugFix easy train task 0: main = ("if x >= 1 then t = x * 12", "return t - x");
# the fix is "edit 1 >= =="; "edit 2 - +" breaks line 2 instead.
FIX, BREAK = "edit 1 >= ==", "edit 2 - +"
# Four members of one group (faults off). States: S0 = buggy start, S1 = fixed, S2 = line 3 broken,
# S3 = fixed and line 3 broken. The state each action is chosen in, and the outcome:
#   m0: view main (S0), FIX (S0), submit (S1)                 R = 1
#   m1: FIX (S0), run_tests (S1), submit (S1)                 R = 1
#   m2: run_tests (S0), BREAK (S0), submit (S2)               R = 0
#   m3: view main (S0), BREAK (S0), FIX (S2), submit (S3)     R = 0
SCRIPTS = (["view main", FIX, "submit"], [FIX, "run_tests", "submit"], ["run_tests", BREAK, "submit"],
           ["view main", BREAK, FIX, "submit"])


def _model():
    torch.manual_seed(0)
    return PolicyModel(PolicyShape(vocab_size=TOK.vocab_size, d_model=16, n_layers=1, n_heads=2, max_len=256))


def _scripted_group(strip_keys: bool = False):
    env = envs.make(envs.BUGFIX_ID, faults=False)
    trajs = []
    for member, actions in enumerate(SCRIPTS):
        obs, info = env.reset(seed=member, options=TASK0)
        observations, rewards, infos = [obs], [], [info]
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            observations.append(obs), rewards.append(reward), infos.append(info)
        assert terminated and info["stop_reason"].startswith("submitted")
        if strip_keys:
            infos = [{k: v for k, v in i.items() if k != "state_key"} for i in infos]
        trajs.append(demo_to_trajectory(observations, actions, rewards, infos, terminated, truncated,
                                        max_len=256, max_action_tokens=16, group_id=0))
    return trajs


def _advantages(name, trajs):
    kw = dict(omega=1.0, gamma=0.95) if name == "gigpo" else {}
    algo = AlgoConfig(name=name, off_policy_correction="none", std="population", adv_eps=1e-6, **kw)
    batch = collate(trajs)
    inputs = UpdateInputs(old_logp=torch.zeros_like(batch.behavior_logp), ref_logp=None,
                          loss_mask=batch.action_mask.clone())
    return make_trainer(name, algo, _model()).advantages(batch, inputs)


def test_gigpo_step_groups_from_real_bugfix_state_keys():
    trajs = _scripted_group()
    assert [t.train_reward for t in trajs] == [1.0, 1.0, 0.0, 0.0]
    keys = [t.state_keys for t in trajs]
    s0, s1, s2, s3 = keys[0][0], keys[0][2], keys[2][2], keys[3][3]
    assert keys == [[s0, s0, s1], [s0, s1, s1], [s0, s0, s2], [s0, s0, s2, s3]] and len({s0, s1, s2, s3}) == 4
    gigpo, grpo = _advantages("gigpo", trajs), _advantages("grpo", trajs)
    # step groups: S0 (7 steps), S1 (3), S2 (2); S3 is a singleton: 12 of the 13 steps recur
    assert gigpo.metrics["train/step_groups"] == 3
    assert gigpo.metrics["train/anchor_hit_rate"] == pytest.approx(12 / 13)
    # A_E = GRPO's: R = [1, 1, 0, 0], mean 0.5, population std 0.5 -> [1, 1, -1, -1] (eps 1e-6)
    a_e = 0.5 / (0.5 + 1e-6)
    # S1 group: returns (gamma = 0.95) m0 step 2 = 1, m1 step 1 = 0.95, m1 step 2 = 1; mean 59/60,
    # population std sqrt((2 (1/60)^2 + (1/30)^2) / 3) = 1/sqrt(1800); so A_S = +sqrt(1/2), -sqrt(2), +sqrt(1/2)
    sd = 1 / math.sqrt(1800)
    adv = gigpo.point_advantages
    assert float(adv[0, 2]) == pytest.approx(a_e + (1 / 60) / (sd + 1e-6), abs=1e-4)  # 1 + 0.7071
    assert float(adv[1, 1]) == pytest.approx(a_e - (1 / 30) / (sd + 1e-6), abs=1e-4)  # 1 - 1.4142
    # S2 group: both returns 0 (constant) and S3 a singleton: A_S = 0, A = A_E = -1
    assert float(adv[2, 2]) == float(adv[3, 2]) == float(adv[3, 3]) == pytest.approx(-a_e)
    assert not torch.allclose(gigpo.tokens, grpo.tokens)


def test_without_state_keys_gigpo_is_grpo_on_the_same_episodes():
    trajs = _scripted_group(strip_keys=True)
    assert all(k == -1 for t in trajs for k in t.state_keys)
    gigpo, grpo = _advantages("gigpo", trajs), _advantages("grpo", trajs)
    assert gigpo.metrics["train/step_groups"] == 0 and gigpo.metrics["train/anchor_hit_rate"] == 0.0
    torch.testing.assert_close(gigpo.tokens, grpo.tokens)


@pytest.mark.parametrize("env_id", [envs.BUGFIX_ID, envs.LONG_HORIZON_ID])
def test_tiny_policy_rollouts_carry_real_keys_and_share_the_reset_anchor(env_id):
    """A group of 4 rollouts of the tiny random policy on one task: every turn has the env's key
    (none is -1) and at least the first step of each member (all chosen in the reset state of the
    same task) recurs, so anchor_hit_rate >= 4 / #steps > 0."""
    engine = RolloutEngine(env_id, num_envs=4, max_len=256, max_action_tokens=4)
    trajs = engine.collect(_model().eval(), make_requests(1, 4, seed=0, task_indices=[0]),
                           generator=torch.Generator().manual_seed(0))
    steps = sum(t.turns for t in trajs)
    assert all(k != -1 for t in trajs for k in t.state_keys)
    assert len({t.state_keys[0] for t in trajs}) == 1
    batch = collate(trajs)
    inputs = UpdateInputs(old_logp=batch.behavior_logp.clone(), ref_logp=None, loss_mask=batch.action_mask.clone())
    algo = AlgoConfig(name="gigpo", off_policy_correction="none")
    metrics = make_trainer("gigpo", algo, _model()).advantages(batch, inputs).metrics
    assert metrics["train/anchor_hit_rate"] >= 4 / steps
    assert metrics["train/step_groups"] >= 1
