"""Adapter-only checkpoints (``experiments.runtime.adapters``): a LoRA policy's checkpoint holds its
trainable tensors and names its frozen base by path and sha256; resume rebuilds the base from the
config and loads them, equal to an uninterrupted run; a base that differs is a one-line error; the
tiny policy's checkpoint is its full state dict as before. The tiny Hugging Face model of
``tests/conftest.py``'s ``hf_model_dir`` (Qwen2-style: hidden 64, 2 layers, 4 heads of 16, 2
key-value heads, vocabulary 1024)."""

from __future__ import annotations

import json
import math
import shutil
import signal
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("peft")

from algos.metric_keys import wall_clock  # noqa: E402
from experiments.runtime import loop  # noqa: E402
from experiments.runtime.adapters import PolicyCheckpoint, frozen_keys, trainable_keys  # noqa: E402
from experiments.runtime.build import build_policy  # noqa: E402
from experiments.runtime.config import compose_config, validate  # noqa: E402
from experiments.runtime.one_agent import OneAgentLearner  # noqa: E402
from experiments.runtime.rundir import RunDir  # noqa: E402

#: the tiny preset on the Hugging Face policy with LoRA r=4 on q_proj and v_proj, PPO (a value head:
#: trainable too) at G=1 with a stale sampler: 16 rollouts of 4 tasks x 1 per update = 4 updates; the entropy
#: bonus moves the adapters even when every reward is 0 (a random start model)
LORA_RUN = ("experiment=tiny", "policy=hf", "policy.max_len=512", "compression.budget_tokens=128", "policy.lora_r=4",
            "policy.lora_targets='q_proj,v_proj'", "algo=ppo", "algo.entropy_coef=0.05", "algo.group_size=1",
            "algo.tasks_per_update=4", "budget.amount=16",
            "eval.every=2", "rollout.staleness=1", "warmstart.demos=4", "warmstart.epochs=1")
UPDATES, STOP_AFTER = 4, 2
# trainable tensors by hand, r = 4, per layer: q_proj 64 -> 64 (4 heads x 16): lora_A 4x64 = 256,
# lora_B 64x4 = 256; v_proj 64 -> 32 (2 kv heads x 16): lora_A 4x64 = 256, lora_B 32x4 = 128;
# 896 per layer x 2 layers = 1792; value head Linear(64, 1): 64 + 1 = 65. In all 1857 in 10 tensors.
TRAINABLE_NUMEL, TRAINABLE_TENSORS = 2 * (256 + 256 + 256 + 128) + 64 + 1, 2 * 4 + 2


def lora_config(model_dir, run_dir, ws_cache, *overrides):
    return validate(compose_config([*LORA_RUN, f"policy.path={model_dir}", f"run_dir={run_dir}",
                                    f"warmstart.cache_dir={ws_cache}", *overrides]))


@pytest.fixture(autouse=True)
def _keep_sigterm_handler():
    previous = signal.getsignal(signal.SIGTERM)  # loop.run installs its own
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="module")
def ws_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("lora_ws")


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, hf_model_dir, ws_cache):
    """The uninterrupted LoRA run's directory."""
    run_dir = tmp_path_factory.mktemp("lora_full") / "run"
    loop.run(lora_config(hf_model_dir, run_dir, ws_cache))
    return run_dir


def load_checkpoint(run_dir) -> dict:
    return torch.load(Path(run_dir) / "checkpoints" / "last.pt", map_location="cpu", weights_only=False)


def tensors_in(obj):
    """Every tensor inside nested dicts / lists / tuples."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from tensors_in(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from tensors_in(v)


@pytest.mark.slow
def test_a_lora_checkpoint_holds_only_the_trainable_tensors(full_run, hf_model_dir):
    state = load_checkpoint(full_run)
    policy = state["policy"]
    assert policy["format"] == "trainable" and policy["base"]["path"] == str(hf_model_dir)
    tensors = policy["tensors"]
    assert len(tensors) == TRAINABLE_TENSORS and sum(t.numel() for t in tensors.values()) == TRAINABLE_NUMEL
    assert all("lora_" in k or k.startswith("value_head.") for k in tensors)
    assert not set(tensors) & set(policy["frozen_keys"])
    assert "lm.base_model.model.lm_head.weight" in policy["frozen_keys"]
    # the whole file: the policy's tensors, Adam's two moments of each and the 2 behaviour snapshots
    # (staleness 1) of trainable tensors only, plus scalars (Adam's step counts); nothing of the base
    big = [t for t in tensors_in(state) if t.dim() > 0]
    assert sum(t.numel() for t in big) == (1 + 2 + 2) * TRAINABLE_NUMEL
    assert [len(s) for s in state["behavior"]["snapshots"]] == [TRAINABLE_TENSORS] * 2
    assert sum(t.untyped_storage().nbytes() for t in big) == (1 + 2 + 2) * TRAINABLE_NUMEL * 4  # no shared base storage
    weights = sum(f.stat().st_size for f in Path(hf_model_dir).glob("*.safetensors"))
    assert (Path(full_run) / "checkpoints" / "last.pt").stat().st_size < weights / 4


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


@pytest.mark.slow
def test_resume_equals_the_uninterrupted_run(full_run, hf_model_dir, ws_cache, tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    c = lora_config(hf_model_dir, run_dir, ws_cache)
    write = RunDir.save_checkpoint

    def stop_after(self, state):
        write(self, state)
        if state["update"] == STOP_AFTER:
            raise KeyboardInterrupt  # what a SIGTERM during the write does once it is whole

    monkeypatch.setattr(RunDir, "save_checkpoint", stop_after)
    with pytest.raises(SystemExit):
        loop.run(c)
    monkeypatch.setattr(RunDir, "save_checkpoint", write)
    assert load_checkpoint(run_dir)["update"] == STOP_AFTER
    loop.run(c)  # rebuilt from the config (base + warm-start adapters), then the checkpoint loaded
    assert f"resumed {run_dir} at update {STOP_AFTER}" in capsys.readouterr().err
    a, b = RunDir(full_run).metrics(), RunDir(run_dir).metrics()
    assert len(a) == len(b) == UPDATES
    for ra, rb in zip(a, b):
        assert ra.keys() == rb.keys()
        assert {k: (ra[k], rb[k]) for k in ra if not wall_clock(k) and not _same(ra[k], rb[k])} == {}
    ta, tb = load_checkpoint(full_run)["policy"]["tensors"], load_checkpoint(run_dir)["policy"]["tensors"]
    assert ta.keys() == tb.keys()
    for k in ta:
        torch.testing.assert_close(ta[k], tb[k], rtol=1e-5, atol=1e-7, msg=k)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["updates"] == UPDATES
    start = torch.load(summary["start_model/path"], map_location="cpu", weights_only=False)["policy"]
    assert any(not torch.equal(tb[k], start[k]) for k in tb if "lora_" in k)  # the adapters trained


@pytest.mark.slow
def test_a_lora_runs_last_checkpoint_starts_another_run(full_run, hf_model_dir, tmp_path):
    """``policy.init_checkpoint=<a LoRA run's last.pt>``: its trainable tensors load onto the rebuilt
    base exactly (a copy, no arithmetic), the frozen entries stay the base's."""
    last = Path(full_run) / "checkpoints" / "last.pt"
    c = lora_config(hf_model_dir, tmp_path / "next", tmp_path / "ws", f"policy.init_checkpoint={last}")
    policy, _, _ = build_policy(c, str(last))
    saved, own = load_checkpoint(full_run)["policy"]["tensors"], policy.state_dict()
    assert len(saved) == TRAINABLE_TENSORS
    for k, t in saved.items():
        assert torch.equal(own[k], t), k


def _lora_policy(hf_model_dir, tmp_path):
    c = lora_config(hf_model_dir, tmp_path / "run", tmp_path / "ws", "policy.init_checkpoint=")
    policy, _, _ = build_policy(c)
    return policy, PolicyCheckpoint(policy, c.policy.path)


def test_a_base_that_differs_is_a_one_line_error_naming_both_hashes(hf_model_dir, tmp_path):
    policy, ckpt = _lora_policy(hf_model_dir, tmp_path)
    state = ckpt.state_dict()
    assert set(state["tensors"]) == set(trainable_keys(policy)) and state["frozen_keys"] == frozen_keys(policy)
    other, other_ckpt = _lora_policy(hf_model_dir, tmp_path)
    other_ckpt.load_state_dict(state)  # the same base rebuilt: loads
    with torch.no_grad():
        other.causal.model.norm.weight.add_(1.0)  # a frozen base weight that differs
    changed = PolicyCheckpoint(other, str(hf_model_dir))
    with pytest.raises(ValueError) as e:
        changed.load_state_dict(state)
    msg = str(e.value)
    assert "\n" not in msg and state["base"]["sha256"] in msg and changed.base_sha256 in msg
    assert changed.base_sha256 != state["base"]["sha256"]
    with pytest.raises(ValueError, match=r"^checkpoint base model \(path '/elsewhere'.*rebuilt policy's \(path "):
        other_ckpt.load_state_dict({**state, "base": {**state["base"], "path": "/elsewhere"}})


@pytest.mark.slow
def test_resuming_on_another_base_stops_with_one_line(full_run, hf_model_dir, ws_cache, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(full_run, run_dir)
    state = load_checkpoint(run_dir)
    rebuilt = state["policy"]["base"]["sha256"]
    state["policy"]["base"]["sha256"] = "0" * 64  # the checkpoint of a run on another base
    torch.save(state, run_dir / "checkpoints" / "last.pt")
    with pytest.raises(ValueError) as e:
        loop.run(lora_config(hf_model_dir, run_dir, ws_cache))
    msg = str(e.value)
    assert "\n" not in msg and f"sha256 {'0' * 64})" in msg and f"sha256 {rebuilt})" in msg


def test_trainable_keys_that_differ_are_one_line_errors(hf_model_dir, tmp_path):
    policy, ckpt = _lora_policy(hf_model_dir, tmp_path)
    state = ckpt.state_dict()
    first = next(iter(state["tensors"]))
    with pytest.raises(ValueError, match=rf"^checkpoint trainable tensors do not match the policy's {TRAINABLE_TENSORS}"
                                         rf" trainable parameters: missing \['{first}'\], unexpected \[\]$"):
        ckpt.load_state_dict({**state, "tensors": {k: v for k, v in state["tensors"].items() if k != first}})
    with pytest.raises(ValueError, match=r"unexpected \['lm.base_model.model.model.norm.weight'\]$"):
        ckpt.load_state_dict({**state, "tensors": {**state["tensors"],
                                                   "lm.base_model.model.model.norm.weight": torch.zeros(64)}})
    # 27 frozen keys: embedding, final norm, lm_head, and per layer q/k/v weight and bias, o, gate,
    # up, down and 2 norms (12) x 2 layers
    with pytest.raises(ValueError, match=r"^checkpoint left out other keys than the policy's 27 frozen ones: "
                                         r"only in the checkpoint \['x'\], only in the policy \[\]$"):
        ckpt.load_state_dict({**state, "frozen_keys": [*state["frozen_keys"], "x"]})


def test_the_tiny_policys_checkpoint_is_its_full_state_dict(tmp_path):
    c = validate(compose_config(["experiment=tiny", "algo=ppo", "policy.init_checkpoint=", "rollout.staleness=1",
                                 f"run_dir={tmp_path / 'run'}"]))
    learner = OneAgentLearner(c, tmp_path / "run")
    try:
        state = learner.state_dict()
        assert list(state) == ["policy", "critic", "trainer", "meter", "behavior"]
        own = learner.policy.state_dict()
        assert list(state["policy"]) == list(own) and all(torch.equal(state["policy"][k], own[k]) for k in own)
        (snapshot,) = state["behavior"]["snapshots"]
        assert list(snapshot) == list(own)
        learner.load_state_dict(state)
    finally:
        learner.close()
