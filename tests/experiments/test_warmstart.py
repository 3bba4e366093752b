"""Behaviour-cloning warm start: demonstrations laid out like rollouts, BC, caching by config hash."""

import json
import os
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from algos.policy import PolicyModel
from envs.tokenizer import get_tokenizer
from experiments.build import load_policy_weights, policy_shape
from experiments.config import register_configs, validate
from experiments.warmstart import cache_key, demonstrations, ensure_warmstart

CONFIGS = str(Path(__file__).resolve().parents[2] / "configs")
register_configs()
torch.set_num_threads(1)


def tiny(tmp_path, *overrides):
    with initialize_config_dir(config_dir=CONFIGS, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=tiny", "env=bugfix",
                                                       f"warmstart.cache_dir={tmp_path}", *overrides])
    return validate(cfg)


def test_demonstrations_mark_only_the_demo_actions_as_sampled(tmp_path):
    c = tiny(tmp_path, "warmstart.demos=4")
    tok = get_tokenizer()
    for tr in demonstrations(c):
        for s in tr.segments:
            for t in s.turns:
                assert s.tokens[t.end] == tok.eos_id and not t.capped
                assert s.action_mask[t.start: t.end + 1] == [1] * (t.end - t.start + 1)
                assert s.tokens[t.start - 1] == tok.sep_id
            assert sum(s.action_mask) == sum(t.end - t.start + 1 for t in s.turns)
            assert set(s.policy_version) <= {-1}  # demos: no policy version sampled them


@pytest.mark.slow
def test_warm_start_is_built_once_and_cached_by_config(tmp_path):
    c = tiny(tmp_path)
    info = ensure_warmstart(c, verbose=False)
    path = Path(info["path"])
    assert path.exists() and 0.0 <= info["start_success"] <= 1.0
    assert info["bc_loss_last"] < info["bc_loss_first"]
    stamp = os.path.getmtime(path)
    again = ensure_warmstart(c, verbose=False)
    assert (again["path"], again["key"], again["start_success"]) == (info["path"], info["key"], info["start_success"])
    assert os.path.getmtime(path) == stamp  # cache hit: nothing rebuilt
    assert json.loads((path.parent / "warmstart.json").read_text())["start_success"] == info["start_success"]
    # a different demo noise is a different start model
    assert cache_key(tiny(tmp_path, "warmstart.noise=0.9")) != cache_key(c)
    # ... where the cache lives (an operational field) or the algorithm is not
    assert cache_key(tiny(tmp_path / "elsewhere")) == cache_key(c)
    assert cache_key(tiny(tmp_path, "algo=ppo")) == cache_key(c)
    # the checkpoint loads into the policy, with or without a value head
    for critic in ("none", "head"):
        load_policy_weights(PolicyModel(policy_shape(c, critic=critic)), info["path"])


def test_behaviour_clone_loss_is_the_full_logits_cross_entropy(tmp_path):
    """BC computes logits only before the action tokens (``forward_at``); its first loss (no step
    taken yet) must equal the token-mean cross-entropy from the full ``model(tokens)`` logits on
    the same first minibatch (the permutation of ``torch.Generator().manual_seed(seed)``)."""
    from algos.batch import collate
    from algos.policy import shift_logprobs
    from experiments.warmstart import behaviour_clone

    c = tiny(tmp_path, "warmstart.demos=6")
    trajs = demonstrations(c)
    torch.manual_seed(0)
    model = PolicyModel(policy_shape(c))
    batch = collate(trajs)
    idx = torch.randperm(batch.num_rows, generator=torch.Generator().manual_seed(3))[:4]
    width = int(batch.valid[idx].sum(1).max())
    tokens, mask = batch.tokens[idx][:, :width], batch.action_mask[idx][:, :width]
    with torch.no_grad():
        logits, _ = model(tokens)
        expected = float(-(shift_logprobs(logits, tokens) * mask).sum() / mask.sum())
    losses = behaviour_clone(model, trajs, epochs=1, lr=1e-3, batch_rows=4, seed=3)
    assert losses[0] == pytest.approx(expected, rel=1e-5)
