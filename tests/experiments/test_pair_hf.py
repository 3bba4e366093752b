"""A Hugging Face policy trains on PairFix: ``experiments.train env=pairfix algo=ppo_ctde|ppo_independent
policy=hf policy.path=<dir>`` (the tiny offline model of ``tests/conftest.py``'s ``hf_model_dir``): the
config, each agent's separate critic over the model's ids, the warm start's demonstrations in the
model's tokenizer, and two updates end to end."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402

from entry import run_entry  # noqa: E402
from algos.metric_keys import wall_clock  # noqa: E402
from experiments.runtime.build import hf_policy, sampling_generator, train_engine, update_requests  # noqa: E402
from experiments.runtime.config import ACTION_TOKEN_MARGIN, compose_config, validate  # noqa: E402
from experiments.runtime.pair import build_learner, critic_shape, warmstart_path  # noqa: E402
from experiments.runtime.schema import ConfigError, resolve_critic  # noqa: E402
from experiments.runtime.warmstart import demo_actions, demo_requests, pair_demo_agents  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def tensors_in(obj):
    """Every tensor inside nested dicts / lists / tuples."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (dict, list, tuple)):
        for v in (obj.values() if isinstance(obj, dict) else obj):
            yield from tensors_in(v)


def pair_overrides(model_dir, algo, *overrides):
    return ["experiment=tiny", "policy=hf", f"policy.path={model_dir}", "env=pairfix", f"algo={algo}", *overrides]


def pair_config(model_dir, algo, *overrides):
    return validate(compose_config(pair_overrides(model_dir, algo, *overrides)))


@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_each_agents_critic_is_a_separate_model_over_the_hf_ids(hf_model_dir, algo):
    c = pair_config(hf_model_dir, algo)
    assert resolve_critic(c) == "separate"
    policy = hf_policy(c)
    sep = policy.layout.next("")  # "\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n" in 15 BPE ids
    # the tiny preset's window: 256 ids after the chat template's 14-id first turn = 270
    assert (len(sep), c.policy.max_len) == (15, 270)
    shape = critic_shape(c, policy)
    # the model's vocabulary (625 ids; the word vocabulary has 561), not the tiny policy's
    assert shape.vocab_size == policy.shape.vocab_size == len(policy.layout.tok) == 625
    # ppo_ctde: own context (<= 270) + the other's without its first id (<= 269) + the separator (15): 2 * 270 + 1 + 15
    assert shape.max_len == (556 if algo == "ppo_ctde" else 270)
    with pytest.raises(ConfigError, match=f"policy.critic='head' is invalid for algo={algo}; allowed: separate"):
        pair_config(hf_model_dir, algo, "policy.critic=head")
    with pytest.raises(ValueError, match="critic_shape of policy.kind=hf needs the policy"):
        critic_shape(c)


def test_the_pair_demonstrations_are_the_action_budgets_and_laid_out_in_the_chat_layout(hf_model_dir):
    """``rollout.max_action_tokens`` of a Hugging Face pair run is the longest action of the pair
    warm start's demonstrations in the model's tokenizer plus the margin; the rollout engine lays
    those demonstrations out in the chat layout (every turn's ids decode to one of those actions)."""
    c = pair_config(hf_model_dir, "ppo_independent", "warmstart.demos=6", "policy.max_len=1024")  # no episode cut
    layout = hf_policy(c).layout
    actions = demo_actions(c)
    assert c.rollout.max_action_tokens == max(len(layout.action_ids(a)) - 1 for a in actions) + ACTION_TOKEN_MARGIN
    engine = train_engine(c)
    episodes = engine.collect(pair_demo_agents(c), demo_requests(c), layout=layout)
    engine.close()
    turns = [(seg, u) for ep in episodes for t in ep.trajectories() for seg in t.segments for u in seg.turns]
    assert len(episodes) == 6 and turns and not any(u.capped for _, u in turns)
    assert {layout.action_text(seg.tokens[u.start: u.end + 1], False) for seg, u in turns} == actions
    assert all(seg.tokens[u.end] == layout.end_id for seg, u in turns)


@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_a_rewarded_update_moves_every_hf_agents_policy_and_critic(hf_model_dir, algo):
    """One update of both agents on 2 pair episodes (2 turns per agent) of the untrained model, one
    of them given a reward of 1 at each agent's last turn: every agent's policy and critic (ppo_ctde: the
    centralized one, over the joint states in the model's ids) change, with finite losses."""
    c = pair_config(hf_model_dir, algo, "algo.tasks_per_update=2", "++env.kwargs.max_turns=2")
    learner = build_learner(c, warm=False)
    engine = train_engine(c)
    episodes = engine.collect(learner.models(), update_requests(c, 0), 0, sampling_generator(c, 0))
    engine.close()
    for ep in episodes[:1]:
        for t in ep.trajectories():
            t.segments[-1].turns[-1].reward = 1.0
    trainers = learner.trainers
    before = {a: ({k: v.clone() for k, v in trainers[a].policy.state_dict().items()},
                  {k: v.clone() for k, v in trainers[a].critic.state_dict().items()}) for a in ("a", "b")}
    metrics = learner.update(episodes)
    for a in ("a", "b"):
        assert metrics[f"agent_{a}/train/grad_norm"] > 0
        assert all(math.isfinite(metrics[f"agent_{a}/train/{k}"]) for k in ("policy_loss", "value_loss"))
        policy, critic = trainers[a].policy.state_dict(), trainers[a].critic.state_dict()
        assert any(not torch.equal(policy[k], before[a][0][k]) for k in policy)
        assert any(not torch.equal(critic[k], before[a][1][k]) for k in critic)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["ppo_ctde", "ppo_independent"])
def test_a_hf_pair_trains_end_to_end(tmp_path, tmp_path_factory, hf_model_dir, algo):
    """Two updates of 4 pair episodes from the cached pair warm start (one for both algorithms):
    the warm start moved the model's weights, the run's checkpoint holds both agents' models and
    critics, and every agent's trainer metrics are there and finite (at this scale every episode
    fails: the updates' advantages are 0; :func:`test_a_rewarded_update_moves_every_hf_agents_policy_and_critic`
    checks that an update learns)."""
    ws = tmp_path_factory.getbasetemp() / "hf_pair_warmstart"
    args = pair_overrides(hf_model_dir, algo, f"run_dir={tmp_path / 'run'}", f"warmstart.cache_dir={ws}",
                          "warmstart.demos=8", "warmstart.epochs=1", "budget.amount=8", "algo.tasks_per_update=4",
                          "rollout.num_envs=4", "eval.tasks=2", "eval.samples_per_task=1", "++env.kwargs.max_turns=2")
    done = run_entry("experiments.train", args, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    c = validate(compose_config(args))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # 8 pair episodes at 4 per update: 2 updates
    assert [r["update"] for r in rows] == [1, 2] and [r["compute/rollouts"] for r in rows] == [4, 8]
    assert summary["critic"] == ("central" if algo == "ppo_ctde" else "local") and summary["updates"] == 2
    for r in rows:
        for agent in ("a", "b"):
            for key in ("train/policy_loss", "train/value_loss", "train/grad_norm", "critic/value_mean"):
                assert math.isfinite(r[f"agent_{agent}/{key}"]), (agent, key)
    assert summary["start_model/path"] == str(warmstart_path(c, shared=False))
    base = hf_policy(c).state_dict()
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=False)
    for agent in ("a", "b"):
        start = torch.load(ws / warmstart_path(c, False).name / f"policy_{agent}.pt", weights_only=True)
        trained = last["policy"][agent]
        assert set(start) == set(trained) == set(base)
        assert any(not torch.equal(start[k], base[k]) for k in base)  # behaviour cloning moved the model
        assert all(torch.isfinite(v).all() for v in trained.values())
        # the critic embeds the model's 625 ids
        assert last["critic"][agent]["trunk.tok.weight"].shape[0] == 625


@pytest.mark.slow
def test_a_lora_pair_checkpoints_its_adapters_and_resumes_to_the_same_numbers(tmp_path, tmp_path_factory, hf_model_dir,
                                                                             monkeypatch):
    """``ppo_ctde`` on PairFix with LoRA r=4 on q_proj and v_proj: each agent's policy in the run's
    checkpoint is its trainable tensors and its base's path and hash (``adapters.PolicyCheckpoint``),
    not the base weights; a run stopped after its first update and rerun gives the uninterrupted
    run's metrics."""
    from experiments.runtime import loop
    from experiments.runtime.rundir import RunDir

    ws = tmp_path_factory.getbasetemp() / "hf_pair_lora_warmstart"

    def config(run):
        return pair_config(hf_model_dir, "ppo_ctde", f"run_dir={run}", f"warmstart.cache_dir={ws}", "warmstart.demos=8",
                           "warmstart.epochs=1", "budget.amount=8", "algo.tasks_per_update=4", "rollout.num_envs=4",
                           "eval.tasks=2", "eval.samples_per_task=1", "++env.kwargs.max_turns=2", "policy.lora_r=4",
                           "policy.lora_targets='q_proj,v_proj'")

    full = tmp_path / "full"
    loop.run(config(full))
    last = torch.load(full / "checkpoints" / "last.pt", weights_only=False)
    # per agent, r = 4 on each of 2 layers: q_proj 64 -> 64: A 4x64 + B 64x4 = 512; v_proj 64 -> 32:
    # A 4x64 + B 32x4 = 384; 2 x 896 = 1792 in 8 tensors (the critic is a separate model)
    for agent in ("a", "b"):
        policy = last["policy"][agent]
        assert policy["format"] == "trainable" and policy["base"]["path"] == str(hf_model_dir)
        assert len(policy["tensors"]) == 8 and sum(t.numel() for t in policy["tensors"].values()) == 1792
        assert "lm.base_model.model.lm_head.weight" in policy["frozen_keys"]
    # the whole file, per agent: the adapters, its critic, and Adam's two moments of each; nothing of the base
    critic = sum(t.numel() for t in last["critic"]["a"].values())
    assert sum(t.numel() for t in tensors_in(last) if t.dim() > 0) == 2 * 3 * (1792 + critic)

    part = tmp_path / "part"
    write = RunDir.save_checkpoint

    def stop_after_first(self, state):
        write(self, state)
        if state["update"] == 1:
            raise KeyboardInterrupt  # what a SIGTERM does once the checkpoint is whole

    monkeypatch.setattr(RunDir, "save_checkpoint", stop_after_first)
    with pytest.raises(SystemExit):
        loop.run(config(part))
    monkeypatch.setattr(RunDir, "save_checkpoint", write)
    loop.run(config(part))
    a, b = RunDir(full).metrics(), RunDir(part).metrics()
    assert len(a) == len(b) == 2
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        assert {k: (ra[k], rb[k]) for k in ra if not wall_clock(k)
                and not (ra[k] == rb[k] or (isinstance(ra[k], float) and math.isclose(ra[k], rb[k], rel_tol=1e-6,
                                                                                     abs_tol=1e-9)))} == {}


def test_the_pair_warm_start_clones_within_the_micro_batch_token_budget(hf_model_dir, monkeypatch):
    """With ``policy.micro_batch_tokens`` set, the pair warm start's behaviour cloning forwards
    length-bucketed micro-batches of at most that many padded positions (or one longer row), and
    the budget is part of its cache key; unset, it forwards one padded minibatch of 16 rows."""
    from experiments.runtime import pair
    from experiments.runtime.warmstart import demo_requests

    widths: list[tuple[int, int]] = []
    budget = 600

    def run(*overrides):
        c = pair_config(hf_model_dir, "ppo_independent", "warmstart.demos=4", "warmstart.epochs=1", *overrides)
        policies = pair.pair_policies(c, ("a", "b"))
        for m in policies.values():
            forward = m.forward_at
            monkeypatch.setattr(m, "forward_at", lambda t, w, f=forward: (widths.append(tuple(t.shape)), f(t, w))[1])
        pair.warm_start(policies, c, cache=False)
        return c

    # without the shared prefix counted once, a micro-batch's cost is its rows x its longest row
    budgeted = run(f"policy.micro_batch_tokens={budget}", "policy.shared_prefix=false")
    assert len(demo_requests(budgeted)) == 4 and widths
    assert all(r * w <= budget or r == 1 for r, w in widths), widths
    assert any(r > 1 for r, _ in widths)  # rows were put together, not one at a time
    seen, widths[:] = len(widths), []
    plain = run("policy.shared_prefix=false")
    # 4 demos, each agent's trajectories (one per episode) in one padded minibatch per agent
    assert [r for r, _ in widths] == [4, 4] and seen > 2
    assert pair.pair_bc_bucketed(budgeted) and not pair.pair_bc_bucketed(plain)
    assert pair.warmstart_key(budgeted, False) != pair.warmstart_key(plain, False)
