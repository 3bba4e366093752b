"""A small random-initialised Hugging Face model directory, built offline from the envs' own text.

``build_tiny_model_dir(out)`` writes a Qwen2-style causal LM (``save_pretrained``) and its fast
tokenizer: a byte-level BPE trained with ``tokenizers`` on the text of scripted-agent episodes of
BugFix and LongHorizon-v3 (``CORPUS_SOURCES``: task statements, observations, compression
summaries, actions of the ``oracle`` / ``noisy_oracle`` / ``random`` agents) plus the chat
template's markers, with the ChatML-like template ``CHAT_TEMPLATE``
(prefix-preserving over turns; ``<|im_end|>`` ends every turn and is the end-of-turn token the
model samples). Byte-level BPE encodes any text, so an observation never fails to encode.

torch / transformers / tokenizers are imported inside the functions: importing this module
stays free of them. The command line: ``python -m experiments.hf_tiny --out DIR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import envs
from envs.episode import run_episode

IM_START, IM_END, PAD = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)

# ChatML: every message is "<|im_start|>{role}\n{content}<|im_end|>\n"; the generation prompt is
# "<|im_start|>assistant\n". Earlier turns render the same whatever follows (prefix-preserving).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@dataclass
class TinyModelSpec:
    """Shape of the built model and tokenizer."""

    vocab_size: int = 1024  # BPE merges stop here (the model's embedding has exactly the tokenizer's size)
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    intermediate_size: int = 128
    max_position_embeddings: int = 2048
    episodes: int = 24  # scripted episodes per agent for the tokenizer's corpus
    seed: int = 0


#: the environments whose text the tokenizer is trained on: (env id, the env spec's scripted agents
#: that play, the compression wrapper's kwargs or None)
CORPUS_SOURCES = (
    (envs.BUGFIX_ID, ("oracle", "noisy_oracle", "random"), None),
    (envs.LONG_HORIZON_V3_ID, ("oracle", "noisy_oracle", "random"), {"strategy": "structured_summary"}),
)


def env_corpus(episodes: int = 24, sources=CORPUS_SOURCES) -> list[str]:
    """The text of ``episodes`` scripted episodes per agent of every source (``CORPUS_SOURCES``;
    the agents are the env spec's, ``envs.scripted_agent``): every observation (compression
    summaries included) and every action, in order."""
    out: list[str] = []
    for env_id, agents, compression in sources:
        env = envs.make(env_id, compression=compression)
        try:
            for name in agents:
                agent = envs.scripted_agent(env_id, name)
                for i in range(episodes):
                    ep = run_episode(env, agent, seed=i, options={"task_index": i, "split": "train"}, max_steps=200)
                    out.extend(ep.observations)
                    out.extend(ep.actions)
        finally:
            env.close()
    return out


def train_tokenizer(corpus: list[str], vocab_size: int):
    """A ``PreTrainedTokenizerFast`` (byte-level BPE over ``corpus``, ``SPECIAL_TOKENS``, eos
    ``<|im_end|>``, pad ``<|endoftext|>``, ``CHAT_TEMPLATE``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=IM_END, pad_token=PAD,
                                   clean_up_tokenization_spaces=False)
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_model_dir(out: str | Path, spec: TinyModelSpec | None = None) -> Path:
    """Write the tokenizer and a random-initialised Qwen2 causal LM (seeded) to ``out``."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    spec = spec or TinyModelSpec()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(env_corpus(spec.episodes), spec.vocab_size)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=spec.hidden_size, num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads, num_key_value_heads=spec.num_key_value_heads,
        intermediate_size=spec.intermediate_size, max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=True, eos_token_id=tok.convert_tokens_to_ids(IM_END),
        pad_token_id=tok.convert_tokens_to_ids(PAD), bos_token_id=None,
    )
    torch.manual_seed(spec.seed)
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


__all__ = ["CHAT_TEMPLATE", "CORPUS_SOURCES", "IM_END", "IM_START", "SPECIAL_TOKENS", "TinyModelSpec", "build_tiny_model_dir",
           "env_corpus", "train_tokenizer"]
