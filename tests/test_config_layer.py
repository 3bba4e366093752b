"""Hydra composes the configs; no module walks a defaults list by hand.

A config's ``defaults`` list (its included files, ``override /<group>: <option>`` entries,
``optional`` entries, ``_self_``'s position) means what Hydra's composition makes of it; a second
reader of it drifts from Hydra's rules. Every module of ``envs/``, ``algos/`` and ``experiments/``
but the config layer (:data:`CONFIG_LAYER`, whose ``compose_config`` calls Hydra) is read with
``ast``: none may hold the string ``"defaults"`` or a string (or f-string part) starting with
``"override /"``, the two keys a hand-written walker needs. What a preset selects is read from the
composed config (``compose_config(..., return_hydra_config=True)``: ``hydra.runtime.choices``,
``hydra.sweeper.params``). The checker itself is tested on planted sources.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("envs", "algos", "experiments")
#: the modules that may name a defaults list: the one that composes configs with Hydra
CONFIG_LAYER = ("experiments/runtime/config.py",)


def defaults_readers(source: str) -> list[str]:
    """The string constants of ``source`` that only a defaults-list walker needs: ``"defaults"``
    and those starting with ``"override /"`` (f-string parts included)."""
    return [node.value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and (node.value == "defaults" or node.value.startswith("override /"))]


@pytest.mark.parametrize("source, found", [
    ('cfg.get("defaults")', ["defaults"]),
    ('data["defaults"]', ["defaults"]),
    ('f"override /{group}" in entry', ["override /"]),
    ('"override /env" in entry', ["override /env"]),
    ('"""a docstring about defaults lists"""\nx = {"algo": "grpo"}', []),
    ('compose(config_name="config", overrides=["env=bugfix"], return_hydra_config=True)', []),
])
def test_the_checker_finds_planted_walkers(source, found):
    assert defaults_readers(source) == found


def test_no_module_outside_the_config_layer_reads_a_defaults_list():
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert len(files) > 50  # the packages were found
    offenders = {str(p.relative_to(ROOT)): hits for p in files
                 if str(p.relative_to(ROOT)) not in CONFIG_LAYER and (hits := defaults_readers(p.read_text()))}
    assert offenders == {}, "read a config's defaults list through Hydra (compose_config), not by hand"
