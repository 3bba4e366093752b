"""One rollout engine for one agent and for several: a multi-agent env (PairFix) is an agent
dimension of ``algos.rollout.RolloutEngine``, not a second program.

Read with ``ast`` from every ``.py`` file of ``algos/``, ``experiments/`` and ``benchmarks/``:

- one sampler: ``torch.multinomial`` is called nowhere but in the benchmarks' plain-torch
  reference loops (model work timed without the engine), and ``sample_categorical`` only by the
  engine;
- one feed loop: ``step_last`` (a policy's cached sampling forward) is called in ``algos`` only by
  the engine (and ``TinyBackend``, which is that call), in ``experiments`` and ``benchmarks`` only
  by those benchmark loops;
- one set of run builders: the rollout engine is built in ``experiments/runtime`` only by
  ``experiments/runtime/build.py``, and no agent-specific builder repeats what the one-agent run
  builds (a function named with an agent word, or defined in a module named with one, whose name
  without its agent words is the name of a function of ``experiments/runtime/build.py``,
  ``experiments/runtime/warmstart.py``, ``algos/rollout.py``, ``algos/recording.py``,
  ``algos/requests.py`` or ``algos/evaluation.py``).

The checkers are tested on small synthetic sources with planted violations.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (file, top-level function) of the benchmarks' plain-torch reference loops: model work timed
#: without the engine (the sampling ones with torch's own sampler)
BENCH_BASELINES = frozenset({("benchmarks/train.py", "raw_decode"), ("benchmarks/train.py", "raw_replay"),
                             ("benchmarks/train.py", "bench_turn_cost"), ("benchmarks/hf.py", "_sample")})
#: the homes of the run builders (their top-level functions are the builders)
BUILDER_HOMES = ("experiments/runtime/build.py", "experiments/runtime/warmstart.py", "algos/rollout.py",
                 "algos/recording.py", "algos/requests.py", "algos/evaluation.py")
#: words a second, agent-specific builder's name adds to a builder's
AGENT_WORDS = frozenset({"pair", "pairs", "two", "multi", "agent", "agents", "joint", "make"})


def sources(root: Path = ROOT) -> dict[str, ast.Module]:
    """Relative path -> syntax tree of every ``.py`` file of ``algos/``, ``experiments/`` and ``benchmarks/``."""
    return {p.relative_to(root).as_posix(): ast.parse(p.read_text())
            for pkg in ("algos", "experiments", "benchmarks") for p in sorted((root / pkg).rglob("*.py"))}


def calls_of(trees: dict[str, ast.Module], name: str) -> set[tuple[str, str]]:
    """``(file, enclosing top-level def or class)`` of every call of ``name`` (``f(...)`` or
    ``x.f(...)``); ``""`` for a call at module level."""
    out = set()
    for path, tree in trees.items():
        for top in tree.body:
            owner = top.name if isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ""
            for node in ast.walk(top):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == name:
                    out.add((path, owner))
    return out


def stem(name: str) -> str:
    """``name`` without its agent words (``pair_train_engine`` -> ``train_engine``)."""
    return "_".join(w for w in name.strip("_").split("_") if w not in AGENT_WORDS)


def agent_specific(path: str, name: str) -> bool:
    """True for a function named with an agent word or defined in a module named with one."""
    return stem(name) != name.strip("_") or stem(Path(path).stem) != Path(path).stem


def second_builders(trees: dict[str, ast.Module], homes=BUILDER_HOMES) -> list[str]:
    """``file:function`` of every agent-specific top-level function outside ``homes`` whose
    :func:`stem` is the stem of a top-level function of a home."""
    builders = {stem(n.name) for h in homes if h in trees for n in trees[h].body if isinstance(n, ast.FunctionDef)}
    return sorted(f"{path}:{n.name}" for path, tree in trees.items() if path not in homes for n in tree.body
                  if isinstance(n, ast.FunctionDef) and stem(n.name) in builders and agent_specific(path, n.name))


def test_one_sampler():
    trees = sources()
    assert calls_of(trees, "multinomial") <= BENCH_BASELINES, calls_of(trees, "multinomial") - BENCH_BASELINES
    assert calls_of(trees, "sample_categorical") == {("algos/rollout.py", "RolloutEngine")}


def test_one_feed_loop():
    trees = sources()
    feeds = calls_of(trees, "step_last")
    assert {f for f in feeds if f[0].startswith("algos/")} == {("algos/rollout.py", "RolloutEngine"),
                                                               ("algos/backend.py", "TinyBackend")}
    assert {f for f in feeds if f[0].startswith(("experiments/", "benchmarks/"))} <= BENCH_BASELINES


def test_one_set_of_run_builders():
    trees = sources()
    runtime = {f for f in calls_of(trees, "RolloutEngine") if f[0].startswith("experiments/runtime/")}
    assert {f[0] for f in runtime} == {"experiments/runtime/build.py"}, runtime
    assert second_builders(trees) == []


def test_the_checkers_find_planted_violations():
    trees = {"algos/requests.py": ast.parse("def make_requests(): pass"),
             "algos/rollout.py": ast.parse("class RolloutEngine:\n    def s(self): return sample_categorical(x)"),
             "experiments/runtime/build.py": ast.parse("def train_engine(c): return RolloutEngine(c)"),
             "experiments/runtime/pair.py": ast.parse(
                 "import torch\ndef train_engine(c): return RolloutEngine(c)\n"
                 "def pair_requests(n): pass\ndef agents(): pass\n"
                 "class PairEngine:\n    def go(self, p): return torch.multinomial(p, 1)"),
             "experiments/calibrate/scripted.py": ast.parse("def _train_engine(): pass")}
    assert calls_of(trees, "multinomial") == {("experiments/runtime/pair.py", "PairEngine")}
    assert calls_of(trees, "RolloutEngine") == {("experiments/runtime/build.py", "train_engine"),
                                                ("experiments/runtime/pair.py", "train_engine")}
    assert second_builders(trees, homes=("algos/requests.py", "experiments/runtime/build.py")) == [
        "experiments/runtime/pair.py:pair_requests", "experiments/runtime/pair.py:train_engine"]
    assert stem("pair_train_engine") == stem("train_engine_two_agents") == "train_engine"
