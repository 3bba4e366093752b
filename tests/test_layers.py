"""Imports go one way: envs <- algos <- experiments.runtime <- the other rooms of experiments <-
the entry points, with no import circle anywhere.

The module graph is read with ``ast`` from every ``.py`` file of ``envs/``, ``algos/`` and
``experiments/`` (every import statement, also those inside functions), so a circle that only
holds because one side imports lazily is still a circle here. The rules:

- no cycle among the project's modules (the cycle is named);
- ``envs`` imports nothing from ``algos`` / ``experiments``; ``algos`` nothing from ``experiments``;
- ``experiments.runtime`` imports no other room of ``experiments`` except the leaf
  ``experiments.runfiles``; ``experiments.runfiles`` imports no other room;
- ``experiments.report`` imports nothing from ``experiments.runtime``;
- no module imports an entry point (a top-level ``experiments/<name>.py`` a user runs with
  ``python -m experiments.<name>``), except the ``__main__`` of its own package.

The checker itself is tested on small synthetic graphs with planted violations.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "algos", "experiments")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules ``module`` imports (anywhere in the file): for ``from X import y`` the
    module ``X.y`` when it is one, else ``X``; relative imports resolved."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, base] if base else pkg)
            for a in node.names:
                out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in known else base)
    return {m for m in out if m.split(".")[0] in PACKAGES}


def project_graph(root: Path = ROOT) -> dict[str, set[str]]:
    files = [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))]
    known = {module_name(p, root) for p in files}
    graph = {}
    for p in files:
        name = module_name(p, root)
        graph[name] = imported_modules(ast.parse(p.read_text()), name, p.name == "__init__.py", known) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state and m in graph:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def entry_points(graph: dict[str, set[str]]) -> set[str]:
    """Top-level ``experiments.<name>`` modules (not packages): what users run with ``python -m``."""
    packages = {m.rsplit(".", 1)[0] for m in graph if m.count(".") >= 2}
    return {m for m in graph if m.count(".") == 1 and m.startswith("experiments.") and m not in packages}


def room(module: str) -> str:
    """``envs``, ``algos``, or ``experiments.<room>`` (a top-level module is its own room)."""
    parts = module.split(".")
    return parts[0] if parts[0] != "experiments" else ".".join(parts[:2])


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every import that goes the wrong way, as ``importer -> imported: rule``."""
    entries = entry_points(graph)
    bad = []
    for src, targets in sorted(graph.items()):
        for dst in sorted(targets):
            rule = None
            if _within(src, "envs") and not _within(dst, "envs"):
                rule = "envs imports only envs"
            elif _within(src, "algos") and _within(dst, "experiments"):
                rule = "algos imports nothing from experiments"
            elif dst in entries and dst != src and not (src.endswith(".__main__") and room(src) == room(dst)):
                rule = "an entry point is imported by nobody"
            elif _within(src, "experiments.report") and _within(dst, "experiments.runtime"):
                rule = "experiments.report imports nothing from experiments.runtime"
            elif (_within(src, "experiments.runtime") and _within(dst, "experiments")
                  and room(dst) not in ("experiments.runtime", "experiments.runfiles")):
                rule = "experiments.runtime imports no other room (but experiments.runfiles)"
            elif (_within(src, "experiments.runfiles") and _within(dst, "experiments")
                  and room(dst) != "experiments.runfiles"):
                rule = "experiments.runfiles is a leaf"
            if rule:
                bad.append(f"{src} -> {dst}: {rule}")
    return bad


# ---------------------------------------------------------------------------------- the project
def test_the_project_has_no_import_cycle():
    cycle = find_cycle(project_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_import_goes_the_allowed_way():
    assert layer_violations(project_graph()) == []


def test_the_graph_sees_imports_inside_functions_and_the_entry_points():
    graph = project_graph()
    assert "experiments.runtime.loop" in graph["experiments.train"]
    assert {"experiments.train", "experiments.compare", "experiments.report", "experiments.bench"} & set(graph)
    assert {"experiments.train", "experiments.calibrate", "experiments.warmstart"} <= entry_points(graph)
    assert "experiments.compare" not in entry_points(graph)  # a package (python -m runs its __main__)


# ---------------------------------------------------------------------------------- the checker
def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for pkg in PACKAGES:
        (root / pkg).mkdir(exist_ok=True)
        (root / pkg / "__init__.py").touch()
    return root


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    root = _write(tmp_path, {
        "algos/a.py": "from algos.b import f\n",
        "algos/b.py": "def f():\n    from algos import a\n    return a\n",
    })
    assert find_cycle(project_graph(root)) == ["algos.a", "algos.b", "algos.a"]


def test_a_relative_import_cycle_is_found(tmp_path):
    root = _write(tmp_path, {
        "experiments/report/__init__.py": "",
        "experiments/report/x.py": "from .y import g\n",
        "experiments/report/y.py": "from . import x\n",
    })
    assert find_cycle(project_graph(root)) is not None


@pytest.mark.parametrize("files, expected", [
    ({"envs/e.py": "import algos.p\n", "algos/p.py": ""}, "envs.e -> algos.p: envs imports only envs"),
    ({"algos/p.py": "def f():\n    from experiments.runtime import build\n",
      "experiments/runtime/__init__.py": "", "experiments/runtime/build.py": ""},
     "algos.p -> experiments.runtime.build: algos imports nothing from experiments"),
    ({"experiments/report/__init__.py": "", "experiments/report/load.py": "from experiments.runtime.schema import X\n",
      "experiments/runtime/__init__.py": "", "experiments/runtime/schema.py": "X = 1\n"},
     "experiments.report.load -> experiments.runtime.schema: experiments.report imports nothing from experiments.runtime"),
    ({"experiments/train.py": "", "experiments/claims/__init__.py": "",
      "experiments/claims/common.py": "from experiments.train import run\n"},
     "experiments.claims.common -> experiments.train: an entry point is imported by nobody"),
    ({"experiments/runtime/__init__.py": "", "experiments/runtime/loop.py": "import experiments.report.keys\n",
      "experiments/report/__init__.py": "", "experiments/report/keys.py": ""},
     "experiments.runtime.loop -> experiments.report.keys: experiments.runtime imports no other room (but experiments.runfiles)"),
])
def test_a_planted_wrong_way_import_is_reported(tmp_path, files, expected):
    assert layer_violations(project_graph(_write(tmp_path, files))) == [expected]


def test_the_allowed_directions_are_not_reported(tmp_path):
    root = _write(tmp_path, {
        "envs/e.py": "",
        "algos/p.py": "import envs.e\n",
        "experiments/runfiles/__init__.py": "", "experiments/runfiles/axes.py": "",
        "experiments/runtime/__init__.py": "",
        "experiments/runtime/loop.py": "import algos.p\nfrom experiments.runfiles import axes\n",
        "experiments/report/__init__.py": "", "experiments/report/keys.py": "from experiments.runfiles.axes import A\n",
        "experiments/bench/__init__.py": "", "experiments/bench/envs.py": "",
        "experiments/bench/__main__.py": "from experiments.bench.envs import run\n",
        "experiments/train.py": "from experiments.runtime.loop import run\n",
    })
    graph = project_graph(root)
    assert find_cycle(graph) is None and layer_violations(graph) == []
