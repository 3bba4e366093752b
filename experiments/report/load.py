"""Loading run directories: find them under a sweep, read and validate each against the contract
in :mod:`experiments.report.keys`, and group them by environment and method."""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from algos import metric_keys as mk
from algos.registry import load_builtin_trainers

from experiments.report.keys import (
    ARCHIVED_METRICS,
    CONCLUSION_AXES,
    CRITIC_EV_KEY,
    CRITIC_KEYS,
    CURVE_AXES,
    METHODS_WITH_CRITIC,
    METRIC_KEYS,
    REQUIRED_CONFIG_KEYS,
    RUN_FILES,
    STOP_PREFIX,
    SUMMARY_KEYS,
    ReportError,
)
from experiments.report.pair import PAIR_METHODS, PAIR_NA_SUMMARY_KEYS, pair_required_metrics


@dataclass
class Run:
    """One run directory: its resolved config, its metrics lines (one per update) and its summary."""

    run_dir: Path
    algo: str
    env: str
    seed: int
    config: dict[str, Any]
    metrics: list[dict[str, Any]]
    summary: dict[str, Any]

    def series(self, key: str, x_key: str = mk.COMPUTE_ROLLOUTS) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the lines holding ``key`` (x is the compute counter ``x_key``)."""
        rows = [r for r in self.metrics if r.get(key) is not None and math.isfinite(float(r[key]))]
        x = np.array([float(r[x_key]) for r in rows])
        y = np.array([float(r[key]) for r in rows])
        return x, y

    def has(self, key: str) -> bool:
        return any(key in r and r[key] is not None for r in self.metrics)


def config_get(config: Mapping[str, Any], dotted: str) -> Any:
    """``config["a"]["b"]`` for ``dotted="a.b"``; ``KeyError(dotted)`` when a part is missing."""
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def config_value(config: Mapping[str, Any], run_dir: Path, *candidates: str) -> Any:
    """The first of the dotted ``candidates`` present in ``config``; :class:`ReportError` naming the run otherwise."""
    for dotted in candidates:
        try:
            return config_get(config, dotted)
        except KeyError:
            continue
    raise ReportError(f"config.yaml of run {run_dir} has no {' / '.join(candidates)}")


def metrics_file(d: Path) -> Path | None:
    """``d/metrics.jsonl``, else a run record's ``d/metrics.jsonl.gz`` (:data:`ARCHIVED_METRICS`), else None."""
    for name in (RUN_FILES[0], ARCHIVED_METRICS):
        if (d / name).is_file():
            return d / name
    return None


def is_run_dir(d: Path) -> bool:
    """A directory holding every file of a run (:data:`RUN_FILES`; the metrics may be a run record's
    ``metrics.jsonl.gz``)."""
    return metrics_file(d) is not None and all((d / f).is_file() for f in RUN_FILES[1:])


def find_run_dirs(root: str | Path) -> list[Path]:
    """Directories under ``root`` (inclusive) holding metrics.jsonl (or metrics.jsonl.gz), config.yaml
    and summary.json, sorted."""
    root = Path(root)
    found = {m.parent for name in (RUN_FILES[0], ARCHIVED_METRICS) for m in root.rglob(name)}
    return sorted(d for d in found if is_run_dir(d))


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``metrics.jsonl`` (or its gzipped record); :class:`ReportError` naming the
    file and line of one that is not JSON, or when there is none."""
    text = gzip.decompress(path.read_bytes()).decode() if path.name == ARCHIVED_METRICS else path.read_text()
    metrics = []
    for i, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                metrics.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ReportError(f"{path} line {i} is not JSON: {e}") from None
    if not metrics:
        raise ReportError(f"{path} has no updates")
    return metrics


def load_run(run_dir: str | Path) -> Run:
    """Read and validate one run directory (:func:`validate_run`)."""
    run_dir = Path(run_dir)
    config = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"), resolve=True)
    assert isinstance(config, dict)
    summary = json.loads((run_dir / "summary.json").read_text())
    path = metrics_file(run_dir)
    if path is None:
        raise ReportError(f"run {run_dir} has neither {RUN_FILES[0]} nor {ARCHIVED_METRICS}")
    metrics = read_metrics(path)
    algo = str(config_value(config, run_dir, "algo.name"))
    env = str(config_value(config, run_dir, "env.name"))
    seed = int(config_value(config, run_dir, "seed"))
    run = Run(run_dir, algo, env, seed, config, metrics, summary)
    validate_run(run)
    return run


def validate_run(run: Run) -> None:
    """Raise :class:`ReportError` naming the first missing required key and the run dir. A
    two-agent run (``algo`` in ``experiments.report.pair.PAIR_METHODS``) follows
    :func:`_validate_pair_run` instead."""
    if run.algo in PAIR_METHODS:
        return _validate_pair_run(run)
    where = run.run_dir
    _validate_summary_and_lines(run, skip=())
    required = (*METRIC_KEYS, *(CRITIC_KEYS if run.algo in METHODS_WITH_CRITIC else ()))
    for key in required:
        if not run.has(key):
            raise ReportError(f"metrics.jsonl of run {where} never has required key {key!r}")
    if run.algo in METHODS_WITH_CRITIC:
        for i, row in enumerate(run.metrics, start=1):
            if (row.get(mk.CRITIC_HELDOUT_POINTS) or 0) >= 2 and CRITIC_EV_KEY not in row:
                raise ReportError(
                    f"metrics.jsonl line {i} of run {where} has critic/heldout_points="
                    f"{row['critic/heldout_points']} but no {CRITIC_EV_KEY!r}"
                )
    if not any(k.startswith(STOP_PREFIX) for r in run.metrics for k in r):
        raise ReportError(f"metrics.jsonl of run {where} has no {STOP_PREFIX}<reason> counters")
    for key in REQUIRED_CONFIG_KEYS:
        config_value(run.config, where, key)


def _validate_summary_and_lines(run: Run, skip) -> None:
    """Every :data:`SUMMARY_KEYS` entry not in ``skip`` in summary.json; ``update``, ``algo`` and
    every compute axis in every metrics line, whose ``algo`` is the config's."""
    where = run.run_dir
    for key in SUMMARY_KEYS:
        if key not in skip and key not in run.summary:
            raise ReportError(f"summary.json of run {where} is missing required key {key!r}")
    for i, row in enumerate(run.metrics, start=1):
        for key in ("update", "algo", *dict.fromkeys((*CURVE_AXES, *CONCLUSION_AXES))):
            if key not in row:
                raise ReportError(f"metrics.jsonl line {i} of run {where} is missing required key {key!r}")
        if row["algo"] != run.algo:
            raise ReportError(f"metrics.jsonl line {i} of run {where} has algo={row['algo']!r} "
                              f"but config.yaml says algo.name={run.algo!r}")


def _validate_pair_run(run: Run) -> None:
    """The two-agent contract (experiments/report/pair.py): :data:`SUMMARY_KEYS` except
    ``PAIR_NA_SUMMARY_KEYS``; ``update``, ``algo`` and every compute axis in every metrics line;
    ``pair_required_metrics`` (the team's success, each trained agent's critic points) somewhere;
    the config keys. No group, stop-reason or team-critic keys."""
    where = run.run_dir
    _validate_summary_and_lines(run, skip=PAIR_NA_SUMMARY_KEYS)
    try:
        frozen = tuple(config_get(run.config, "algo.frozen") or ())
    except KeyError:
        frozen = ()
    for key in pair_required_metrics(frozen):
        if not run.has(key):
            raise ReportError(f"metrics.jsonl of run {where} never has required key {key!r}")
    for key in REQUIRED_CONFIG_KEYS:
        config_value(run.config, where, key)


def load_runs(root: str | Path) -> list[Run]:
    """Every run directory under ``root``; :class:`ReportError` when there is none."""
    dirs = find_run_dirs(root)
    if not dirs:
        raise ReportError(f"no run directories (with {', '.join(RUN_FILES)}) under {root}")
    return [load_run(d) for d in dirs]


def method_order(methods: Iterable[str], order: Sequence[str] | None = None) -> list[str]:
    """The methods present, those named in ``order`` first (in that order; default: the trainer
    registry's order, ``algos.registry.load_builtin_trainers``, as the compare job's defaults:
    GRPO before PPO, ppo_independent before ppo_ctde), then the others by name. The first is the
    Conclusion's baseline."""
    preferred = list(order) if order is not None else list(load_builtin_trainers())
    ms = set(methods)
    return [m for m in dict.fromkeys(preferred) if m in ms] + sorted(ms - set(preferred))


def group_runs(runs: Sequence[Run], order: Sequence[str] | None = None) -> dict[str, dict[str, list[Run]]]:
    """``{env: {method: [runs sorted by seed]}}``, methods in :func:`method_order` (``order``)."""
    out: dict[str, dict[str, list[Run]]] = {}
    for r in runs:
        out.setdefault(r.env, {}).setdefault(r.algo, []).append(r)
    for env in out:
        out[env] = {m: sorted(out[env][m], key=lambda r: r.seed) for m in method_order(out[env], order)}
    return dict(sorted(out.items()))
