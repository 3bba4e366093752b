"""The metric contract (``algos/metric_keys.py``) is the one home of every logged key.

- no string constant or f-string shaped like a metric key (a namespace of
  ``metric_keys.NAMESPACES`` followed by anything without whitespace: ``"eval/success"``,
  ``f"rollout/stop/{r}"``, ``f"agent_{a}/{k}"``, a bare ``"compute/"``) appears in a ``.py`` file of
  ``envs/``, ``algos/`` or ``experiments/`` outside the contract; the scan itself is run on planted
  violations;
- ``declared`` knows plain keys, families and wrapped keys and nothing else; every declaration is
  complete and names a producer file that exists;
- docs/metrics.md's generated block is the contract (``python -m experiments.metrics_doc --check``),
  and the command rewrites a drifted page back to it.

That every key a run really logs is declared is checked on the runs of the end-to-end tests
(tests/experiments/test_train.py, test_step_methods_end_to_end.py, test_train_pair.py).
"""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from algos import metric_keys as mk
from entry import run_entry
from experiments.metrics_doc import BEGIN, END, PAGE
from experiments.report import keys

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "algos", "experiments")
CONTRACT = Path("algos") / "metric_keys.py"


def key_shape() -> re.Pattern:
    """A string that starts with a namespace of the contract and holds no whitespace; an f-string's
    replacement fields read as ``{}`` (so ``agent_<X>/`` matches ``agent_{}/`` and ``agent_a/``)."""
    alts = [r"agent_(?:\{\}|[A-Za-z0-9]+)/" if ns.startswith(mk.AGENT) else re.escape(ns) for ns in mk.NAMESPACES]
    return re.compile(rf"(?:{'|'.join(alts)})\S*")


def key_literals(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every key-shaped string constant or f-string of ``source``."""
    shape, tree = key_shape(), ast.parse(source)
    inside_fstrings: set[int] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside_fstrings |= {id(n) for n in ast.walk(node)}
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            if shape.fullmatch(text):
                found.append((node.lineno, f"f{text!r}"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings
                and shape.fullmatch(node.value)):
            found.append((node.lineno, repr(node.value)))
    return sorted(found)


def scan(root: Path) -> list[str]:
    """``path:line: literal`` for every key-shaped string of the product packages under ``root``."""
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root)
            if rel != CONTRACT:
                out += [f"{rel}:{line}: {text}" for line, text in key_literals(path.read_text())]
    return out


# ---------------------------------------------------------------- the scan

def test_no_metric_key_literal_outside_the_contract():
    found = scan(ROOT)
    assert not found, ("metric keys written outside algos/metric_keys.py (declare the key there and use "
                       "its constant; docs/metrics.md, Adding a metric):\n" + "\n".join(found))


PLANTED = '''
from algos import metric_keys as mk

def metrics(r, a, k, prefix):
    """Writes eval/success and compute/rollouts (a docstring, not a key)."""
    out = {"eval/success": 1.0, mk.EVAL_SUCCESS: 1.0}          # line 6: a literal key
    out[f"rollout/stop/{r}"] = 1                                # line 7: an f-string family member
    out[f"agent_{a}/{k}"] = 2                                   # line 8: a per-agent key
    out["compute/" + k] = 3                                     # line 9: a bare namespace
    out["agent_b/train/policy_loss"] = 4                        # line 10: a literal per-agent key
    out[f"{prefix}success"] = 5                                 # not key-shaped: the prefix is data
    print("see eval/success", "runs/compare", "eval.tasks", "train")  # prose, a path, config keys
    return out
'''


def test_the_scan_finds_planted_violations(tmp_path):
    assert key_literals(PLANTED) == [(6, "'eval/success'"), (7, "f'rollout/stop/{}'"), (8, "f'agent_{}/{}'"),
                                     (9, "'compute/'"), (10, "'agent_b/train/policy_loss'")]
    # in a tree: every product package is scanned, the contract itself is not
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
    (tmp_path / "envs" / "clean.py").write_text("KEY = mk.TRAIN_LR\n")
    (tmp_path / "experiments" / "sub").mkdir()
    (tmp_path / "experiments" / "sub" / "bad.py").write_text('x = {"off_policy/new_gap": 0.0}\n')
    (tmp_path / CONTRACT).write_text('TRAIN_LR = _key("train/lr", "learning rate", "p", "m")\n')
    assert scan(tmp_path) == ["experiments/sub/bad.py:1: 'off_policy/new_gap'"]


def test_the_shape_is_derived_from_the_contract_namespaces():
    shape = key_shape()
    for ns in mk.NAMESPACES:
        assert shape.fullmatch(ns.replace("<X>", "a") + "x"), ns
    assert not shape.fullmatch("agent_/x") and not shape.fullmatch("evaluation/x")
    assert not shape.fullmatch("eval/success rate")  # whitespace: prose


# ---------------------------------------------------------------- the contract

def test_declared_knows_keys_families_and_wrapped_keys():
    assert mk.declared("eval/success").unit == "fraction"
    assert mk.declared("rollout/stop/submitted_resolved").key == "rollout/stop/<reason>"
    assert mk.declared("eval/family_success/easy").key == "eval/family_success/<family>"
    assert mk.declared("agent_a/train/policy_loss").key == "agent_<X>/<key>"
    assert mk.declared("agent_b/rollout/success_bug_in_b_only").key == "agent_<X>/<key>"
    assert mk.declared("eval_train/hack_attempt/read_ref").key == "eval_train/<key>"
    assert mk.declared("start_model/agent_b/eval/turns").key == "start_model/agent_<X>/<key>"
    assert mk.declared("report/bugfix/success_vs_rollouts").key == "report/<image>"
    # a wrapper needs a declared inner key; unnamespaced keys (update, algo) are not metric keys
    assert mk.undeclared(["train/bogus", "agent_a/bogus/x", "eval_train/train_flops", "rollout/stop/",
                          "update", "algo", "eval/success"]) == ["agent_a/bogus/x", "eval_train/train_flops",
                                                                  "rollout/stop/", "train/bogus"]


def test_members_prefixes_and_twins():
    assert mk.member(mk.ROLLOUT_STOP, reason="done") == "rollout/stop/done"
    assert mk.member(mk.EVAL_SUCCESS_BUG_IN_ONLY, X="a") == "eval/success_bug_in_a_only"
    assert mk.prefix(mk.EVAL_FAMILY_SUCCESS) == "eval/family_success/" == keys.FAMILY_EVAL_PREFIX
    assert mk.agent_key("b", mk.TRAIN_LR) == "agent_b/train/lr"
    assert mk.on_train_split(mk.EVAL_SUCCESS) == "eval_train/success" == mk.EVAL_TRAIN_SUCCESS
    with pytest.raises(ValueError, match="has no <family>; allowed: \\['reason'\\]"):
        mk.member(mk.ROLLOUT_STOP, family="x")
    with pytest.raises(ValueError, match="no value for \\['<reason>'\\]"):
        mk.member(mk.ROLLOUT_STOP)
    with pytest.raises(ValueError, match="'train/lr' is not an eval/ key"):
        mk.on_train_split(mk.TRAIN_LR)
    with pytest.raises(ValueError, match="'train/lr' declared twice"):
        mk._key("train/lr", "x", "y", "z")


def test_the_wall_clock_keys_are_the_clock_measured_ones():
    """Six declared keys come from the clock: the tool time is simulated (a function of the seed),
    so it is no wall-clock key; an agent's copy of a wall-clock key is one."""
    assert all(mk.declared(k) is not None and mk.declared(k).unit in ("seconds", "tokens/s") for k in mk.WALL_CLOCK)
    assert len(mk.WALL_CLOCK) == 6
    assert mk.wall_clock("compute/wall_seconds") and mk.wall_clock("agent_a/train/update_seconds")
    assert not mk.wall_clock("compute/tool_seconds") and not mk.wall_clock("rollout/mean_tool_seconds")
    assert not mk.wall_clock("agent_a/compute/tool_seconds") and not mk.wall_clock("eval/success")


def test_every_declaration_is_complete():
    wheres = {mk.JSONL, mk.SUMMARY, mk.BOTH, mk.WANDB, "wandb"}
    for key, m in mk.METRICS.items():
        assert m.key == key and m.unit and m.meaning and m.where in wheres, m
        assert any(key.startswith(ns.replace("<X>/", "")) for ns in mk.NAMESPACES), key
        for producer in m.producer.split(", "):
            assert (ROOT / producer).is_file(), (key, producer)
    # the report's required keys and the compute axes are declared, plain keys
    for key in (*keys.SUMMARY_KEYS, *keys.METRIC_KEYS, *keys.CRITIC_KEYS, *keys.CURVE_AXES, *mk.COMPUTE_AXES):
        assert key in mk.METRICS and not mk.METRICS[key].is_family, key


def test_prefix_built_keys_are_declared():
    """Keys built from a namespace and a field name (not scanned as literals) are declared: the
    compute meter's counters (``compute/`` + each field) and the report's axes among them."""
    from algos.compute import ComputeMeter

    counters = ComputeMeter().metrics()
    assert len(counters) == 10 and mk.undeclared(counters) == []
    assert set(mk.COMPUTE_AXES) <= set(counters)


# ---------------------------------------------------------------- docs/metrics.md

def test_the_metrics_page_is_the_contract():
    done = run_entry("experiments.metrics_doc", ["--check"], cwd=ROOT)
    assert done.returncode == 0, done.stderr
    text = PAGE.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert "## Adding a metric" in text.split(BEGIN)[0]  # hand-written, above the generated block
    for key in mk.METRICS:
        assert f"| `{key}` |" in text, key


def test_the_doc_command_rewrites_a_drifted_page(tmp_path):
    page = tmp_path / "metrics.md"
    shutil.copy(PAGE, page)
    drifted = PAGE.read_text().replace("| `train/lr` | learning rate |", "| `train/lr` | percent |")
    assert drifted != PAGE.read_text()
    page.write_text(drifted)
    done = run_entry("experiments.metrics_doc", ["--check", str(page)], cwd=tmp_path)
    assert done.returncode == 1 and "differs from algos/metric_keys.py" in done.stderr and "percent" in done.stderr
    assert page.read_text() == drifted  # --check writes nothing
    done = run_entry("experiments.metrics_doc", [str(page)], cwd=tmp_path)
    assert done.returncode == 0 and page.read_text() == PAGE.read_text()
    page.write_text("# Metrics\n\nno generated block\n")
    done = run_entry("experiments.metrics_doc", [str(page)], cwd=tmp_path)
    assert done.returncode == 2 and "has no generated block" in done.stderr
