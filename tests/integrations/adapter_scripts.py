"""Helpers of the framework-adapter tests: scripted plans of the harness's oracle agents, their
translation into tool calls (the name and arguments of one method of a TRL environment), and a
tiny local Qwen2-style model with a byte-level tokenizer carrying the Qwen2.5 chat template."""

from __future__ import annotations

from pathlib import Path

import envs
from envs.bugfix.agents import make_agent
from envs.episode import run_episode
from envs.integrations import episode_args
from envs.long_horizon_v3_agents import make_agent as make_lh_agent

TUTORIAL = {"difficulty": "tutorial", "faults": False}
TEMPLATE = Path(__file__).with_name("qwen2_5_chat_template.jinja")  # as Qwen2.5 instruct models ship it


def oracle_actions(env_id: str, task_index: int, split: str = "train", agent: str = "oracle",
                   **env_kwargs) -> tuple[list[str], list[str], dict]:
    """``(actions, observations, final info)`` of a scripted agent (``oracle`` by default) playing
    the row ``(split, task_index)`` directly on the env, seeded as the adapters seed it."""
    seed, options = episode_args(split, task_index)
    env = envs.make(env_id, **env_kwargs)
    make = make_agent if env_id == envs.BUGFIX_ID else make_lh_agent
    record = run_episode(env, make(agent), seed=seed, options=options)
    return record.actions, record.observations, record.final_info


def tool_call(action: str) -> tuple[str, dict]:
    """``(tool name, arguments)`` of an action string of either env's grammar (BugFix-v2,
    LongHorizon-v3)."""
    w = action.split(" ")
    verb = w[0]
    if verb in ("ls", "undo", "run_tests", "give_up", "skip_tests", "status", "forfeit", "submit"):
        return verb, {}
    if verb == "view":
        return "view", {"file": w[1]}
    if verb == "edit":
        return "edit", {"line": int(w[1]), "old": w[2], "new": w[3]}
    if verb in ("replace", "insert"):
        return verb, {"line": int(w[1]), "statement": " ".join(w[2:])}
    if verb == "delete":
        return "delete", {"line": int(w[1])}
    if verb == "edit_test":
        return "edit_test", {"n": int(w[1]), "out": int(w[2])}
    if verb == "delete_test":
        return "delete_test", {"n": int(w[1])}
    if verb == "read":
        return "read_notes", {}
    if verb == "fix":
        return "fix", {"stage_input": w[1], "approach": w[2]}
    raise ValueError(f"action {action!r} has no tool; allowed: either env's grammar")


SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>",
            "</tool_response>"]


def tiny_model_dir(tmp_path: Path, corpus: list[str]) -> Path:
    """A byte-level BPE tokenizer with the Qwen2.5 chat template and a random 2-layer Qwen2 model,
    saved with ``save_pretrained``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=1024, special_tokens=SPECIALS,
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 additional_special_tokens=SPECIALS[1:])
    hf.chat_template = TEMPLATE.read_text()
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(hf), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384,
                      eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id)
    model = Qwen2ForCausalLM(cfg)
    model.generation_config = GenerationConfig(eos_token_id=hf.eos_token_id, pad_token_id=hf.pad_token_id)
    out = tmp_path / "tiny"
    model.save_pretrained(out)
    hf.save_pretrained(out)
    return out
