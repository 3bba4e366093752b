"""The TRL adapter: every tool is a typed, documented method TRL can expose; tool calls replay an
episode exactly as the env plays it; the reward is the training grader's with the verifier and the
stop reason beside it; and two real ``GRPOTrainer`` steps run on CPU with a tiny local model."""

from __future__ import annotations

import inspect
import json
import re

import pytest

import envs
from envs.integrations import NOT_ENDED, TextEpisode
from envs.integrations.trl import BugFixToolEnv, LongHorizonToolEnv, report_verifier
from envs.long_horizon_v3 import ACTIONS_LINE, FIX_NAMES
from integrations.adapter_scripts import TEMPLATE, TUTORIAL, oracle_actions, tiny_model_dir, tool_call

LH3 = {"n_stages": 5, "n_rules": 3}  # constructor knobs of LongHorizon-v3 passed through the adapter


def _tools(cls) -> list[str]:
    """The methods TRL turns into tools: public functions of the class other than reset / get_reward."""
    return [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
            if not n.startswith("_") and n not in ("reset", "get_reward")]


def test_every_tool_has_a_json_schema_and_covers_the_grammar():
    from transformers.utils import get_json_schema

    from envs.bugfix.actions import USAGE

    assert sorted(_tools(BugFixToolEnv)) == sorted(USAGE)
    verbs = [a.split(" ")[0] for a in ACTIONS_LINE.removeprefix("actions : ").split(" | ")]  # LongHorizon-v3's
    assert sorted(_tools(LongHorizonToolEnv)) == sorted("read_notes" if v == "read" else v for v in verbs)
    assert sorted(_tools(LongHorizonToolEnv)) == ["fix", "forfeit", "read_notes", "status", "submit"]
    for cls in (BugFixToolEnv, LongHorizonToolEnv):
        for name in _tools(cls):
            schema = get_json_schema(getattr(cls(), name))["function"]
            assert schema["name"] == name and schema["description"]
            assert all(p["description"] for p in schema["parameters"].get("properties", {}).values())


@pytest.mark.parametrize("cls,knobs", [(BugFixToolEnv, TUTORIAL), (LongHorizonToolEnv, LH3)])
def test_oracle_tool_calls_equal_the_direct_env(cls, knobs):
    actions, observations, final = oracle_actions(cls.env_id, 4, **knobs)
    env = cls(**knobs)
    assert env.reset(prompt=[{"role": "user", "content": "x"}], split="train", task_index=4) == "\n\n" + observations[0]
    assert env.report["stop_reason"] == NOT_ENDED and env.get_reward() == 0.0
    for action, expected in zip(actions, observations[1:]):
        name, args = tool_call(action)
        assert getattr(env, name)(**args) == expected
    assert env.get_reward() == 1.0 and env.verified == 1 and env.stop_reason == "submitted_resolved"
    assert env.report["task_id"] == final["task_id"] and env.report["terminated"]
    name, args = tool_call(actions[0])
    assert getattr(env, name)(**args) == "episode ended : submitted_resolved . no further actions"
    assert env.report["turns"] == len(actions)


def test_long_horizon_tools_play_longhorizon_v3_with_its_knobs():
    """The LongHorizon adapter is v3 (task ids ``lh3-``, ``n_stages`` / ``n_rules`` reach the env);
    the oracle needs ``n_stages + 2`` tool calls; v1 (registered for its claims) has no adapter."""
    env = LongHorizonToolEnv(**LH3)
    task = env.reset(split="heldout", task_index=2)
    assert "finish 5 stages" in task and ACTIONS_LINE in task
    assert env.report["task_id"] == "lh3-heldout-2"
    notes = env.read_notes()
    assert notes.startswith("notes : ") and len(notes.split("\n")[0].split(" , ")) == 3
    assert env.status().startswith("status : 5 stages left , stage 1 : fails on ")
    actions, _, _ = oracle_actions(envs.LONG_HORIZON_V3_ID, 2, split="heldout", **LH3)
    assert len(actions) == 5 + 2 and actions[0] == "read notes" and actions[-1] == "submit"
    with pytest.raises(ValueError, match="no text adapter"):
        TextEpisode(envs.LONG_HORIZON_ID)


def test_a_wrong_approach_is_silent_and_fails_the_submit():
    """One wrong ``fix`` shows the next stage exactly as the right one does; the ``submit`` then
    fails: reward 0, verified 0. A ``fix`` naming another input is the env's error, no stage done."""
    actions, observations, _ = oracle_actions(envs.LONG_HORIZON_V3_ID, 4, **LH3)
    env = LongHorizonToolEnv(**LH3)
    env.reset(task_index=4)
    assert env.read_notes() == observations[1]
    _, right = tool_call(actions[1])
    others = [x for x in ("boundary", "empty", "load") if x != right["stage_input"]]
    assert env.fix(others[0], right["approach"]).startswith("error: stage 1 : fails on ")
    wrong = next(x for x in FIX_NAMES if x != right["approach"])
    assert env.fix(right["stage_input"], wrong) == observations[2]  # silent: the oracle's next observation
    for action in actions[2:-1]:
        name, args = tool_call(action)
        getattr(env, name)(**args)
    assert env.submit() == "submitted : failed ."
    assert env.get_reward() == 0.0 and env.verified == 0 and env.stop_reason == "submitted_failed"
    assert env.report["turns"] == len(actions) + 1 and env.report["terminated"]
    assert env.forfeit() == "episode ended : submitted_failed . no further actions"


def test_reward_the_verifier_denies_is_reported_beside_it():
    knobs = {**TUTORIAL, "grader": "visible"}
    actions, _, _ = oracle_actions(envs.BUGFIX_ID, 2, agent="hack_hardcode", **knobs)
    hacked, cut = BugFixToolEnv(**knobs), BugFixToolEnv(**knobs)
    hacked.reset(task_index=2)
    for action in actions:
        name, args = tool_call(action)
        getattr(hacked, name)(**args)
    cut.reset(task_index=2)
    cut.run_tests()  # the rollout ends here, before the episode
    assert hacked.get_reward() == 1.0 and hacked.verified == 0
    assert cut.get_reward() == 0.0 and cut.stop_reason == NOT_ENDED and cut.verified == 0
    metrics, extra = {}, {}
    out = report_verifier(completions=[[], []], environments=[hacked, cut],
                          log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
    assert out == [None, None]
    assert metrics == {"verified": 0.0, "hacked": 0.5, "stop/not_ended": 0.5, "stop/submitted_resolved": 0.5}
    assert extra == {"verified": [0, 0], "stop_reason": ["submitted_resolved", NOT_ENDED]}


def test_group_members_of_one_row_share_the_instance():
    row = {"prompt": [], "split": "heldout", "task_index": 9}
    a, b = BugFixToolEnv(), BugFixToolEnv()  # easy: tool faults on
    assert a.reset(**row) == b.reset(**row)
    assert [a.run_tests(), a.view("main"), a.run_tests()] == [b.run_tests(), b.view("main"), b.run_tests()]
    assert a.report == b.report


def test_bad_rows_name_the_value():
    env = BugFixToolEnv()
    with pytest.raises(ValueError, match="task_index missing"):
        env.reset(prompt=[])
    with pytest.raises(ValueError, match="task_index=-2"):
        env.reset(task_index=-2)
    with pytest.raises(ValueError, match="seed='a'"):
        env.reset(task_index=1, seed="a")
    with pytest.raises(ValueError, match="compression="):
        BugFixToolEnv(compression={"strategy": "summary"})


# ---- two GRPOTrainer steps on CPU ---------------------------------------------------------------
def _assistant_text(name: str, args: dict) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call><|im_end|>'


def _scripted_generate(tokenizer, plans: dict, quit_tool: str):
    """A ``model.generate`` stand-in: member 0 of a group (even rows) plays the oracle's plan of the
    row's task (``plans[task_index]``), member 1 calls ``quit_tool``; the turn is the number of tool
    responses in the row so far."""
    import torch

    def generate(input_ids, attention_mask=None, **kwargs):
        outs = []
        for r, (ids, mask) in enumerate(zip(input_ids, attention_mask)):
            text = tokenizer.decode(ids[mask.bool()].tolist())
            chat = text[text.index("task_index"):]  # after the system message (it lists the tool schemas)
            turn = chat.count("<tool_response>")
            task = int(re.search(r"task_index (\d+)", chat).group(1))
            quit_ = turn > 0 and f'"name": "{quit_tool}"' in chat
            plan = [(quit_tool, {})] if quit_ or (turn == 0 and r % 2 == 1) else plans[task]
            completion = _assistant_text(*plan[turn]) if turn < len(plan) else "done<|im_end|>"
            outs.append(tokenizer.encode(completion, add_special_tokens=False))
        width = max(len(o) for o in outs)
        new = torch.full((len(outs), width), tokenizer.pad_token_id, dtype=torch.long)
        for r, o in enumerate(outs):
            new[r, : len(o)] = torch.tensor(o)
        return torch.cat([input_ids, new.to(input_ids.device)], dim=1)

    return generate


@pytest.mark.slow
@pytest.mark.parametrize("cls,knobs,quit_tool,ask", [(BugFixToolEnv, TUTORIAL, "give_up", "Fix main ."),
                                                     (LongHorizonToolEnv, LH3, "forfeit", "Fix every stage .")])
def test_grpo_trainer_two_steps_on_cpu(tmp_path, monkeypatch, cls, knobs, quit_tool, ask):
    """Each group plays one task: member 0 the oracle's tool calls, member 1 ``quit_tool``. The
    env's reward (1 vs 0) gives a non-zero advantage, so the two steps change the weights; tool
    calls succeed, and the verifier's rate and the stop reasons are logged beside the reward."""
    import torch
    from datasets import Dataset
    from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    tasks = (0, 1)
    plans = {i: [tool_call(a) for a in oracle_actions(cls.env_id, i, **knobs)[0]] for i in tasks}
    rows = [{"prompt": [{"role": "user", "content": f"{ask} task_index {i}"}], "split": "train",
             "task_index": i} for i in tasks]
    corpus = [TEMPLATE.read_text(), *(r["prompt"][0]["content"] for r in rows)]
    for i in tasks:
        corpus += oracle_actions(cls.env_id, i, **knobs)[1] + [_assistant_text(n, a) for n, a in plans[i]]
    from transformers.utils import get_json_schema
    corpus += [json.dumps(get_json_schema(getattr(cls(**knobs), n))) for n in _tools(cls)]
    model_dir = tiny_model_dir(tmp_path, corpus)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = Qwen2ForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}

    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, gradient_checkpointing=False,
                      per_device_train_batch_size=2, num_generations=2, max_steps=2, learning_rate=1e-2,
                      max_completion_length=1536, logging_steps=1, report_to="none", save_strategy="no", seed=0)
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer, train_dataset=Dataset.from_list(rows),
                          environment_factory=lambda: cls(**knobs), reward_funcs=[report_verifier])

    trainer.model.generate = _scripted_generate(tokenizer, plans, quit_tool)
    trainer.train()

    logs = [h for h in trainer.state.log_history if "reward" in h]
    assert len(logs) == 2
    for h in logs:
        assert h[f"rewards/{cls.__name__}/mean"] == 0.5 and h["reward"] == 0.5
        assert h["verified"] == 0.5 and h["hacked"] == 0.0
        assert h["stop/submitted_resolved"] == 0.5 and h["stop/forfeit"] == 0.5
        assert h["tools/call_frequency"] > 0 and h["tools/failure_frequency"] == 0
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
