"""Build a tiny random-initialised Hugging Face model directory offline:
``python -m experiments.hf_tiny --out DIR`` (``experiments.runtime.hf_tiny.build_tiny_model_dir``: a Qwen2-style
causal LM, a byte-level BPE trained on the envs' episode text, a ChatML-like chat template)."""

from __future__ import annotations

import argparse

from experiments.runtime.hf_tiny import TinyModelSpec, build_tiny_model_dir


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="directory to write the model and tokenizer to")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.hidden % a.heads:
        raise SystemExit(f"--hidden={a.hidden} must be divisible by --heads={a.heads}")
    out = build_tiny_model_dir(a.out, TinyModelSpec(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                                                    num_attention_heads=a.heads, num_key_value_heads=a.heads,
                                                    seed=a.seed))
    print(out)


if __name__ == "__main__":
    main()
