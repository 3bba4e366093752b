"""Imports go one way: envs <- algos <- experiments.runtime <- the other rooms of experiments <-
the entry points <- benchmarks, with no import circle anywhere.

The module graph is read with ``ast`` from every ``.py`` file of ``envs/``, ``algos/``,
``experiments/`` and ``benchmarks/`` (every import statement, also those inside functions), so a
circle that only holds because one side imports lazily is still a circle here. The rules:

- no cycle among the project's modules (the cycle is named);
- ``envs`` imports nothing from ``algos`` / ``experiments``; ``algos`` nothing from ``experiments``;
- nothing in ``envs``, ``algos`` or ``experiments`` imports ``benchmarks`` (the developer benchmarks
  of a checkout, outside the installed package);
- ``experiments.runtime`` imports no other room of ``experiments`` except the leaf
  ``experiments.runfiles``; ``experiments.runfiles`` imports no other room;
- ``experiments.report`` imports nothing from ``experiments.runtime``;
- no module imports an entry point (a top-level ``experiments/<name>.py`` a user runs with
  ``python -m experiments.<name>``), except the ``__main__`` of its own package;
- ``algos`` names no concrete env (:func:`concrete_envs`, :func:`concrete_env_violations`): an
  algorithm gets its env through the env factory (``envs.make``, ``envs.scripted_agent``, ...) and
  the spec object or step info it is handed; the generic env infrastructure (``envs.spec``,
  ``envs.stop``, ``envs.tokenizer``, ``envs.episode``, ``envs.compression``, ...) it may import.

The checkers themselves are tested on small synthetic trees with planted violations.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "algos", "experiments", "benchmarks")


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
            if _within(dst, "benchmarks") and not _within(src, "benchmarks"):
                rule = "benchmarks is imported by nobody in envs, algos or experiments"
            elif _within(src, "envs") and not _within(dst, "envs"):
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


def _parsed(root: Path, package: str) -> dict[str, tuple[Path, ast.AST]]:
    """module name -> (path, syntax tree) of every ``.py`` file of ``root/package``."""
    return {module_name(p, root): (p, ast.parse(p.read_text())) for p in sorted((root / package).rglob("*.py"))}


def _spec_calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == "EnvSpec"]


def _env_unit(module: str) -> str:
    """``module`` itself for a top-level module of ``envs``; ``envs.<pkg>`` for a module of an env
    package ``envs/<pkg>/`` (the package is one env)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def concrete_envs(root: Path = ROOT) -> set[str]:
    """What ``algos`` may not name: the concrete env modules and the concrete env constants.

    A **concrete env module** is a module of ``envs`` that declares an env (its source calls
    ``EnvSpec(...)``), or one that a ``"module:attr"`` string of such a call names (the env class,
    its scripted agents, its floor agents, its instructions); for a module inside an env package
    ``envs/<pkg>/`` the whole package ``envs.<pkg>`` is concrete (every module of it). So
    ``envs.bugfix`` (all of it), ``envs.pairfix`` (all of it), ``envs.long_horizon``,
    ``envs.long_horizon_agents``, ``envs.long_horizon_v3``, ``envs.long_horizon_v3_agents``.

    A **concrete env constant** is ``envs.NAME`` for a module-level name of ``envs/__init__.py``
    that is imported there from a concrete env module (``BUGFIX``, ...), or assigned there from an
    expression that reads such a name, transitively (``SPECS``, ``ENV_IDS``, ``MULTI_AGENT_ENVS``,
    ``BUGFIX_ID``, ...). The functions of ``envs/__init__.py`` (``make``, ``spec_of``, ...) are the
    env factory, not constants.

    Returned as dotted names: modules (``envs.bugfix``) and constants (``envs.SPECS``)."""
    parsed = _parsed(root, "envs")
    concrete: set[str] = set()
    for module, (_, tree) in parsed.items():
        calls = _spec_calls(tree)
        if calls:
            concrete.add(_env_unit(module))
        for call in calls:
            for k in call.keywords:
                if isinstance(k.value, ast.Constant) and isinstance(k.value.value, str) and ":" in k.value.value:
                    concrete.add(_env_unit(k.value.value.partition(":")[0]))
    init = parsed.get("envs", (None, ast.Module(body=[], type_ignores=[])))[1]
    tainted: set[str] = set()
    for node in init.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if any(_within(node.module, c) for c in concrete):
                tainted.update(a.asname or a.name for a in node.names)
    assigns = [n for n in init.body if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None]
    grew = True
    while grew:
        grew = False
        for node in assigns:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if reads & tainted and not names <= tainted:
                tainted |= names
                grew = True
    return concrete | {f"envs.{name}" for name in tainted}


def names_taken(tree: ast.AST, package: str = "envs") -> set[str]:
    """``package.NAME`` for every name a module takes from the package ``package`` itself:
    ``from package import NAME`` and ``alias.NAME`` where ``alias`` is bound by ``import package``
    (or ``import package.sub``, or ``import package as alias``)."""
    aliases: set[str] = set()
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname is None and a.name.split(".")[0] == package:
                    aliases.add(package)
                elif a.name == package:
                    aliases.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == package:
            out.update(f"{package}.{a.name}" for a in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            out.add(f"{package}.{node.attr}")
    return out


def concrete_env_violations(root: Path = ROOT) -> list[str]:
    """Every module of ``algos`` that imports a concrete env module or takes a concrete env
    constant (:func:`concrete_envs`), as ``importer -> name: algos names no concrete env``."""
    concrete = concrete_envs(root)
    known = {module_name(p, root) for pkg in PACKAGES for p in (root / pkg).rglob("*.py")}
    bad = []
    for module, (path, tree) in _parsed(root, "algos").items():
        refs = imported_modules(tree, module, path.name == "__init__.py", known) | names_taken(tree)
        bad += [f"{module} -> {ref}: algos names no concrete env"
                for ref in sorted(refs) if any(_within(ref, c) for c in concrete)]
    return bad


# ---------------------------------------------------------------------------------- the project
def test_the_project_has_no_import_cycle():
    cycle = find_cycle(project_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_import_goes_the_allowed_way():
    assert layer_violations(project_graph()) == []


def test_algos_names_no_concrete_env():
    assert concrete_env_violations() == []


def test_the_concrete_envs_are_the_spec_declaring_modules_and_the_spec_table():
    concrete = concrete_envs()
    assert {"envs.bugfix", "envs.pairfix", "envs.long_horizon", "envs.long_horizon_agents", "envs.long_horizon_v3",
            "envs.long_horizon_v3_agents"} == {c for c in concrete if c[5:].islower()}
    assert {"envs.SPECS", "envs.ENV_IDS", "envs.MULTI_AGENT_ENVS", "envs.BUGFIX", "envs.BUGFIX_ID",
            "envs.LONG_HORIZON_V3", "envs.PAIRFIX_ID"} <= concrete
    # the generic infrastructure and the env factory stay importable
    assert not {"envs.spec", "envs.stop", "envs.tokenizer", "envs.episode", "envs.compression", "envs.make",
                "envs.spec_of", "envs.scripted_agent", "envs.EnvSpec"} & concrete


def test_the_graph_sees_imports_inside_functions_and_the_entry_points():
    graph = project_graph()
    assert "experiments.runtime.loop" in graph["experiments.train"]
    assert {"experiments.train", "experiments.compare", "experiments.report", "benchmarks", "benchmarks.envs"} <= set(graph)
    assert {"experiments.train", "experiments.critic_probe", "experiments.warmstart"} <= entry_points(graph)
    # packages (python -m runs their __main__)
    assert not {"experiments.compare", "experiments.calibrate", "benchmarks"} & entry_points(graph)


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
    ({"experiments/report/__init__.py": "", "experiments/report/x.py": "def f():\n    from benchmarks.envs import run\n",
      "benchmarks/envs.py": "def run():\n    pass\n"},
     "experiments.report.x -> benchmarks.envs: benchmarks is imported by nobody in envs, algos or experiments"),
    ({"algos/p.py": "import benchmarks\n"}, "algos.p -> benchmarks: benchmarks is imported by nobody in envs, algos or experiments"),
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
        "experiments/calibrate/__init__.py": "", "experiments/calibrate/band.py": "",
        "experiments/calibrate/__main__.py": "from experiments.calibrate.band import main\n",
        "experiments/train.py": "from experiments.runtime.loop import run\n",
        "benchmarks/envs.py": "from experiments.runtime.loop import run\nimport envs.e\n",
        "benchmarks/__main__.py": "from benchmarks.envs import run\n",
    })
    graph = project_graph(root)
    assert find_cycle(graph) is None and layer_violations(graph) == []


_ENVS_TREE = {
    "envs/spec.py": "class EnvSpec:\n    pass\n",
    "envs/stop.py": "class StopReason:\n    pass\n",
    "envs/fix/__init__.py": "from envs.fix.spec import SPEC\n",
    "envs/fix/spec.py": "from envs.spec import EnvSpec\nSPEC = EnvSpec(name='fix', entry_point='envs.fix.env:FixEnv')\n",
    "envs/fix/env.py": "class FixEnv:\n    pass\n",
    "envs/fix/grade.py": "def is_hack(info):\n    return False\n",
    "envs/walk.py": "from envs.spec import EnvSpec\nSPEC = EnvSpec(name='walk', scripted_agents='envs.walkers:make')\n",
    "envs/walkers.py": "def make(name):\n    return name\n",
    "envs/__init__.py": ("from envs.fix import SPEC as FIX\nfrom envs.walk import SPEC as WALK\n"
                         "from envs.spec import EnvSpec\nSPECS = (FIX, WALK)\nIDS = tuple(s.name for s in SPECS)\n"
                         "FIX_NAME = FIX.name\nLIMIT = 3\n\ndef make(name):\n    return name\n"),
}


def test_the_concrete_envs_of_a_synthetic_tree(tmp_path):
    root = _write(tmp_path, _ENVS_TREE)
    assert concrete_envs(root) == {"envs.fix", "envs.walk", "envs.walkers", "envs.FIX", "envs.WALK", "envs.SPECS",
                                   "envs.IDS", "envs.FIX_NAME"}


@pytest.mark.parametrize("source, expected", [
    ("from envs.fix.grade import is_hack\n", "envs.fix.grade"),
    ("from envs.fix import SPEC\n", "envs.fix"),
    ("import envs.fix.env\n", "envs.fix.env"),
    ("from envs import walkers\n", "envs.walkers"),
    ("def f():\n    from envs import SPECS\n    return SPECS\n", "envs.SPECS"),
    ("import envs\nNAME = envs.FIX_NAME\n", "envs.FIX_NAME"),
    ("import envs.stop as s\nimport envs as e\nX = e.IDS\n", "envs.IDS"),
    ("import envs.stop\nX = envs.WALK\n", "envs.WALK"),
])
def test_a_planted_concrete_env_in_algos_is_reported(tmp_path, source, expected):
    root = _write(tmp_path, {**_ENVS_TREE, "algos/p.py": source})
    assert concrete_env_violations(root) == [f"algos.p -> {expected}: algos names no concrete env"]


def test_the_env_factory_and_the_generic_env_modules_are_not_reported(tmp_path):
    root = _write(tmp_path, {**_ENVS_TREE, "algos/p.py": (
        "import envs\nfrom envs.spec import EnvSpec\nfrom envs.stop import StopReason\nfrom envs import make, LIMIT\n"
        "def f(spec: EnvSpec):\n    return envs.make(spec.name), envs.LIMIT, StopReason\n"),
        "experiments/x.py": "from envs.fix.grade import is_hack\nimport envs\nS = envs.SPECS\n"})
    assert concrete_env_violations(root) == []
