"""``policy=hf policy.path=<dir>``: a Hugging Face causal LM through the same config, warm start,
trainers, run loop and comparison job as the tiny policy (a tiny model built offline,
``tests/conftest.py``'s ``hf_model_dir``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from entry import run_entry  # noqa: E402
import envs  # noqa: E402
from experiments.runtime.build import policy_layout, system_prompt  # noqa: E402
from experiments.runtime.config import compose_config, validate  # noqa: E402
from experiments.runtime.schema import ConfigError, resolve_critic  # noqa: E402
from experiments.runtime.warmstart import cache_key, demonstrations  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: the tiny preset with a window the chat template's per-turn ids fit in (policy=hf's is 1024)
TINY_HF = ("experiment=tiny", "policy=hf", "policy.max_len=512", "compression.budget_tokens=128")


def hf_config(model_dir, *overrides):
    return validate(compose_config([*TINY_HF, f"policy.path={model_dir}", *overrides]))


@pytest.mark.parametrize("overrides, message", [
    (("policy=hf",), "policy.path is empty; policy=hf needs policy.path=<a local model directory or a hub id>"),
    (("policy=hf", "policy.path=/no/such/dir"), "policy.path='/no/such/dir' is neither a directory nor a hub id"),
    (("policy=hf", "policy.path=."), "policy.path='.' is not a Hugging Face model directory (no config.json)"),
    (("policy.kind=big",), "policy.kind='big' is not a valid choice; allowed: tiny, hf"),
    (("policy.dtype=fp8",), "policy.dtype='fp8' is not a valid choice; allowed: auto, float32, bfloat16, float16"),
    (("policy.device=tpu",), "policy.device='tpu' is not a valid choice; allowed: auto, cpu, cuda, cuda:N"),
    (("policy.lora_r=-1",), "policy.lora_r=-1 must be >= 0"),
])
def test_bad_hf_knobs_are_one_line_errors(overrides, message):
    with pytest.raises(ConfigError) as e:
        validate(compose_config(list(overrides)))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_hf_model_problems_are_one_line_errors_before_any_compute(hf_model_dir):
    with pytest.raises(ConfigError, match="end_token 'zzz' is not a token of the tokenizer"):
        hf_config(hf_model_dir, "policy.end_token=zzz")
    with pytest.raises(ConfigError, match=r"policy.lora_targets='q_proj,nope': LoRA targets \['nope'\] are not "
                                          r"modules of the model; its linear modules: .*q_proj"):
        hf_config(hf_model_dir, "policy.lora_r=4", "policy.lora_targets='q_proj,nope'")
    hf_config(hf_model_dir, "policy.lora_r=4", "policy.lora_targets='q_proj,v_proj'")  # both exist
    with pytest.raises(ConfigError, match="policy.critic='separate' is not available with policy.kind=hf on a one-agent env"):
        hf_config(hf_model_dir, "algo=ppo", "policy.critic=separate")


def test_the_action_budget_is_derived_from_the_tokenizer_when_unset(hf_model_dir):
    """``rollout.max_action_tokens`` unset: the tiny policy's 12 words (the same run hash and
    warm-start key as an explicit 12), a Hugging Face policy's longest warm-start demo action in
    its tokenizer plus the margin; the composed config is given the derived value."""
    from algos.hf_backend import load_layout
    from experiments.runtime.config import ACTION_TOKEN_MARGIN
    from experiments.runtime.rundir import config_hash
    from experiments.runtime.warmstart import demo_actions

    tiny, tiny12 = (validate(compose_config(["experiment=tiny", *o])) for o in ((), ("rollout.max_action_tokens=12",)))
    assert tiny.rollout.max_action_tokens == 12
    assert (config_hash(tiny), cache_key(tiny)) == (config_hash(tiny12), cache_key(tiny12))
    cfg = compose_config([*TINY_HF, f"policy.path={hf_model_dir}"])
    c = validate(cfg)
    layout = load_layout(hf_model_dir)
    longest = max(len(layout.action_ids(a)) - 1 for a in demo_actions(c))
    assert c.rollout.max_action_tokens == cfg.rollout.max_action_tokens == longest + ACTION_TOKEN_MARGIN


def test_a_too_small_action_budget_stops_the_entry_point_before_any_compute(tmp_path, hf_model_dir):
    run_dir, ws = tmp_path / "run", tmp_path / "ws"
    proc = run_entry("experiments.train", [*TINY_HF, f"policy.path={hf_model_dir}", "rollout.max_action_tokens=1",
                                           f"run_dir={run_dir}", f"warmstart.cache_dir={ws}"], cwd=ROOT, env=None)
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("config error: rollout.max_action_tokens=1 is below the longest warm-start demo action in "
                           f"the tokenizer of policy.path={str(hf_model_dir)!r}") and "allowed: >= " in line
    assert not run_dir.exists() and not ws.exists()  # no run directory, no warm start
    # without the warm start no demo is laid out: a small budget caps the policy's actions, nothing more
    assert hf_config(hf_model_dir, "rollout.max_action_tokens=1", "policy.init_checkpoint=").rollout.max_action_tokens == 1


def test_a_system_prompt_longer_than_the_window_is_a_config_error(hf_model_dir):
    with pytest.raises(ConfigError, match=r"^policy.max_len=512 is too small for policy.path=.* with its system prompt: "
                                          r"the first turn renders to \d+ ids before any observation; need policy.max_len >= "):
        hf_config(hf_model_dir, "policy.system_prompt='" + "run_tests " * 600 + "'")


def test_ppo_with_hf_gets_a_value_head_and_grpo_none(hf_model_dir):
    assert resolve_critic(hf_config(hf_model_dir, "algo=ppo")) == "head"
    assert resolve_critic(hf_config(hf_model_dir, "algo=grpo")) == "none"


def test_the_warm_start_key_names_the_model(hf_model_dir, tmp_path):
    tiny = validate(compose_config(["experiment=tiny"]))
    hf = hf_config(hf_model_dir)
    assert len({cache_key(tiny), cache_key(hf), cache_key(hf_config(hf_model_dir, "policy.lora_r=4"))}) == 3
    # a model directory whose tokenizer differs is another start model
    other = tmp_path / "other"
    other.mkdir()
    for f in Path(hf_model_dir).iterdir():
        (other / f.name).write_bytes(f.read_bytes())
    template = other / "chat_template.jinja"
    template.write_text(template.read_text().replace("<|im_start|>", "<|im_start|> "))
    assert cache_key(hf_config(other)) != cache_key(hf)


def test_demonstrations_are_rendered_through_the_chat_template(hf_model_dir):
    """The warm start's behaviour-cloning targets are exactly the demo actions' ids (each closed
    by the end-of-turn id); every chat-template and observation id has weight 0."""
    from experiments.runtime.build import new_policy

    c = hf_config(hf_model_dir, "warmstart.demos=3")
    layout = policy_layout(new_policy(c))
    trajs = demonstrations(c, layout)
    assert len(trajs) == 3
    for t in trajs:
        (s,) = t.segments
        in_actions = sorted(i for u in s.turns for i in range(u.start, u.end + 1))
        assert [i for i, m in enumerate(s.action_mask) if m] == in_actions
        for u in s.turns:
            ids = s.tokens[u.start: u.end + 1]
            assert ids[-1] == layout.end_id and ids == layout.action_ids(layout.action_text(ids, False))


def _train(run_dir, ws_cache, model_dir, *overrides):
    args = [*TINY_HF, f"policy.path={model_dir}", f"run_dir={run_dir}", f"warmstart.cache_dir={ws_cache}", *overrides]
    proc = run_entry("experiments.train", args, cwd=ROOT, env=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in (Path(run_dir) / "metrics.jsonl").read_text().splitlines()]
    return json.loads((Path(run_dir) / "summary.json").read_text()), lines


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["grpo", "ppo", "gigpo"])
def test_train_runs_end_to_end_from_the_hf_warm_start_on_bugfix(tmp_path_factory, hf_model_dir, algo):
    ws = tmp_path_factory.getbasetemp() / "hf_warmstart"
    run_dir = tmp_path_factory.mktemp(f"hf_{algo}")
    summary, lines = _train(run_dir, ws, hf_model_dir, f"algo={algo}")
    # experiment=tiny: 2 updates of 2 tasks x G=4 (every method's group size on a one-agent env) = 16 rollouts
    assert summary["compute/rollouts"] == 16 and summary["updates"] == 2
    assert summary["critic"] == ("head" if algo == "ppo" else "none")
    assert Path(summary["start_model/path"]).is_file() and summary["start_model/success"] >= 0
    train = [x for x in lines if "train/behavior_old_logp_gap" in x]
    assert train and all(x["train/behavior_old_logp_gap_max"] <= 1e-5 for x in train)  # sampler = trainer (fp32 CPU)
    assert all(x["compute/train_flops"] > 0 for x in train)
    text = "".join(r["text"] for r in json.loads((Path(run_dir) / "transcripts.json").read_text())["transcripts"])
    assert text and "<|im_start|>" not in text and "<|im_end|>" not in text


@pytest.mark.slow
def test_train_runs_on_long_horizon_with_compression(tmp_path, hf_model_dir):
    summary, lines = _train(tmp_path / "run", tmp_path / "ws", hf_model_dir, "algo=ppo", "env=long_horizon_v3",
                            "compression=structured_summary", "compression.trigger=turns",
                            "compression.every_turns=1", "policy.lora_r=4")
    assert summary["compute/rollouts"] == 16  # experiment=tiny: 2 updates of 2 tasks x G=4
    assert any(x.get("rollout/mean_segments", 1) > 1 for x in lines)  # a compression opened a new segment


@pytest.mark.slow
def test_compare_runs_the_hf_policy_end_to_end(tmp_path, hf_model_dir):
    proc = run_entry("experiments.compare", ["--tiny", "--seeds", "0", "--sweep-dir", str(tmp_path / "sweep"),
                                             "--logger", "none", "--", "policy=hf", f"policy.path={hf_model_dir}",
                                             "policy.max_len=512", f"warmstart.cache_dir={tmp_path / 'ws'}"],
                     cwd=ROOT, env=None, sweeps_in_process=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = (tmp_path / "sweep" / "report.md").read_text()
    assert "grpo" in report and "ppo" in report


@pytest.mark.slow
def test_warmstart_entry_point_builds_the_hf_start_model(tmp_path, hf_model_dir):
    """``python -m experiments.warmstart ... policy=hf policy.path=DIR`` (docs/own-model.md) builds
    and caches the start model of the Hugging Face policy and prints its measured success."""
    proc = run_entry("experiments.warmstart", [*TINY_HF, f"policy.path={hf_model_dir}",
                                               f"warmstart.cache_dir={tmp_path / 'ws'}"], cwd=ROOT, env=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (info,) = list((tmp_path / "ws").glob("*/warmstart.json"))
    ws = json.loads(info.read_text())
    assert ws["demos"] >= 1 and 0 <= ws["start_success"] <= 1 and (info.parent / "policy.pt").is_file()


def test_env_instructions_start_the_system_message(hf_model_dir):
    c = hf_config(hf_model_dir, "policy.env_instructions=true", "policy.system_prompt='Be brief.'", "policy.max_len=4096")
    assert system_prompt(c) == envs.instructions(c.env.name) + "\nBe brief."
    assert system_prompt(hf_config(hf_model_dir)) is None
    with pytest.raises(ConfigError, match=r"^policy.env_instructions=true: env 'long_horizon' has no instructions; "
                                          r"allowed: bugfix, long_horizon_v3$"):
        hf_config(hf_model_dir, "env=long_horizon", "policy.env_instructions=true")
