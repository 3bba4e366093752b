"""The command line of ``python -m benchmarks <command>``: benchmarks that print ratios against a baseline
measured side by side in the same run.

    python -m benchmarks envs [--steps 20000] [--repeats 5] [--env agentrl/BugFix-v2 ...]
    python -m benchmarks train [...]          # benchmarks/train.py
    python -m benchmarks e2e --baseline DIR   # benchmarks/e2e.py
    python -m benchmarks hf [--device cuda]   # benchmarks/hf.py
    python -m benchmarks gpu --model-config DIR --out DIR   # benchmarks/gpu.py
    python -m benchmarks async [--staleness 1]   # benchmarks/async_rollouts.py

Subcommands live in ``SUBCOMMANDS`` (name -> help, argument adder, runner); adding one is one
entry there. Every command but ``envs`` is imported only when chosen (:func:`lazy`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Callable

from benchmarks.envs import add_envs_arguments, run_envs


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def lazy(module: str, attribute: str) -> Callable:
    """``module.attribute`` imported on first call: torch and the runtime stay out of ``bench envs``
    (an optional heavy dependency kept lazy on purpose)."""
    return lambda *args: getattr(importlib.import_module(module), attribute)(*args)


SUBCOMMANDS: dict[str, Subcommand] = {
    "envs": Subcommand("env steps/s next to FrozenLake-v1, and the ratio", add_envs_arguments, run_envs),
    "train": Subcommand("training throughput next to raw-torch bounds (benchmarks/train.py)",
                        lazy("benchmarks.train", "add_arguments"), lazy("benchmarks.train", "run")),
    "e2e": Subcommand("end-to-end training tokens/s, current tree vs a baseline tree (benchmarks/e2e.py)",
                      lazy("benchmarks.e2e", "add_arguments"), lazy("benchmarks.e2e", "run")),
    "gpu": Subcommand("the Hugging Face path on one GPU: SmolLM2's shape, random weights (benchmarks/gpu.py)",
                      lazy("benchmarks.gpu", "add_arguments"), lazy("benchmarks.gpu", "run")),
    "async": Subcommand("wall seconds per update, rollout.mode=sync next to async (benchmarks/async_rollouts.py)",
                        lazy("benchmarks.async_rollouts", "add_arguments"),
                        lazy("benchmarks.async_rollouts", "run")),
    "hf": Subcommand("Hugging Face policy: sampling and update tokens/s next to generate / re-encoding / TRL "
                     "(benchmarks/hf.py)", lazy("benchmarks.hf", "add_arguments"),
                     lazy("benchmarks.hf", "run")),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(SUBCOMMANDS) + "}")
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, command in SUBCOMMANDS.items():
        subparser = sub.add_parser(name, help=command.help)
        if name == chosen:  # only the chosen command's arguments (and imports) are needed
            command.add_arguments(subparser)
    args = parser.parse_args(argv)
    return SUBCOMMANDS[args.command].run(args)
