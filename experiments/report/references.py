"""Reference rows beside the methods: the start model, the program-blind floor and the oracle
ceiling, on the same task set as the runs' held-out evaluation.

Task set of an env's runs (from the first run's resolved config): env id ``env.id`` (a one-agent
env spec with scripted agents, ``envs.spec_of``), env knobs ``{**env.kwargs, **eval.env_kwargs}``
(for an env with difficulty presets its ``difficulty`` among them, default the spec's
``default_difficulty``), split ``eval.split`` (default ``heldout``), task indices
``0 .. eval.tasks - 1``, each attempted ``eval.samples_per_task`` times. The scripted agents play
exactly that with :func:`experiments.calibrate.measure`: attempt ``j`` of task ``i`` uses env seed
``REFERENCE_SEED + j * tasks + i`` (so a sweep's references are reproducible). Ceiling: the
spec's ``oracle``. Floor: the best of the spec's floor agents (``envs.floor_agents``; BugFix: the
program-blind agents and ``random``), named in the row. Intervals: 95 % Wilson
over the scored (unmasked) attempts. The start model's row is ``start_model/success`` p of the runs'
summaries with the Wilson interval of ``round(p * n)`` successes in ``n = tasks * samples``
attempts (train.py evaluates it at the same test budget; masked attempts, if any, make n a bound).

Results are cached in ``<sweep>/references.json`` under the task-set spec (:class:`TaskSetSpec`,
keyed by :meth:`TaskSetSpec.cache_key`, its JSON object dumped with sorted keys), so
re-rendering a report does not replay the agents.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from algos import metric_keys as mk
import envs
from algos.metrics import binomial_confidence_interval
from experiments.calibrate.scripted import measure
from experiments.report.load import Run, config_get

REFERENCE_SEED = 0
CACHE_FILE = "references.json"
CACHE_VERSION = 1


@dataclass(frozen=True)
class ReferenceRow:
    """One reference on the runs' task set: ``successes`` of ``scored`` attempts."""

    role: str  # "start model", "program-blind floor", "oracle ceiling"
    agent: str
    successes: int
    scored: int
    rate: float | None = None  # the measured rate when it is not successes / scored (start model)

    @property
    def success(self) -> float:
        if self.rate is not None:
            return self.rate
        return self.successes / self.scored if self.scored else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        if not self.scored:
            return float("nan"), float("nan")
        return binomial_confidence_interval(self.successes, self.scored, 0.95)

    def cells(self) -> list[str]:
        lo, hi = self.interval
        if not self.scored:
            return [self.role, self.agent, "n/a", "n/a", "0"]
        return [self.role, self.agent, f"{self.success:.3f}", f"[{lo:.3f}, {hi:.3f}] (Wilson)", str(self.scored)]


def _get(config: dict, dotted: str, default: Any) -> Any:
    try:
        return config_get(config, dotted)
    except KeyError:
        return default


def scripted_env(env_id: Any) -> envs.EnvSpec | None:
    """The spec of ``env_id`` when calibrate's scripted agents can play it (one agent, scripted
    and floor agents declared); ``None`` otherwise."""
    spec = next((s for s in envs.SPECS if s.id == env_id), None)
    if spec is None or spec.agents != 1 or spec.scripted_agents is None or spec.floor_agents is None:
        return None
    return spec


@dataclass(frozen=True)
class TaskSetSpec:
    """The task set the references are played on (see the module docstring): env ``env_id`` at
    ``difficulty`` (``"default"`` for an env without difficulty presets) with the other env knobs
    ``env_kwargs``, split ``split``, task indices ``0 .. tasks - 1`` each attempted
    ``samples_per_task`` times from env seed ``seed``; ``version`` is the cache format's."""

    env_id: str
    difficulty: str
    split: str
    tasks: int
    samples_per_task: int
    env_kwargs: dict[str, Any] = field(default_factory=dict, hash=False)
    seed: int = REFERENCE_SEED
    version: int = CACHE_VERSION

    def to_json(self) -> dict[str, Any]:
        """The spec as a JSON object (keys named as the fields, ``env_kwargs`` a copy)."""
        return {
            "version": self.version,
            "env_id": self.env_id,
            "split": self.split,
            "tasks": self.tasks,
            "samples_per_task": self.samples_per_task,
            "seed": self.seed,
            "difficulty": self.difficulty,
            "env_kwargs": dict(self.env_kwargs),
        }

    def cache_key(self) -> str:
        """The key of this task set in ``references.json``: :meth:`to_json` dumped with sorted keys."""
        return json.dumps(self.to_json(), sort_keys=True)

    def attempt_seed(self, attempt: int) -> int:
        """The env seed of task 0 in attempt ``attempt`` (task ``i`` uses this plus ``i``)."""
        return self.seed + attempt * self.tasks


def task_set_spec(run: Run) -> TaskSetSpec | None:
    """The held-out task set of ``run`` (see the module docstring); ``None`` for an env without
    scripted agents (:func:`scripted_env`)."""
    env_id = _get(run.config, "env.id", None)
    env = scripted_env(env_id)
    if env is None:
        return None
    kwargs = {**(_get(run.config, "env.kwargs", {}) or {}), **(_get(run.config, "eval.env_kwargs", {}) or {})}
    if env.default_difficulty is not None:
        difficulty = str(kwargs.pop("difficulty", env.default_difficulty))
    else:
        difficulty = "default"
    return TaskSetSpec(
        env_id=env_id,
        difficulty=difficulty,
        split=str(_get(run.config, "eval.split", "heldout")),
        tasks=int(config_get(run.config, "eval.tasks")),
        samples_per_task=int(config_get(run.config, "eval.samples_per_task")),
        env_kwargs=kwargs,
    )


def agents_of(env_id: str) -> tuple[str, tuple[str, ...]]:
    """(ceiling agent, floor agents) of the env's scripted agents: its spec's ``oracle`` and
    ``floor_agents``."""
    return envs.spec_of(env_id).oracle, envs.floor_agents(env_id)


def play(spec: TaskSetSpec, agent: str) -> tuple[int, int]:
    """(successes, scored attempts) of a scripted ``agent`` on the task set ``spec``."""
    successes = scored = 0
    for j in range(spec.samples_per_task):
        row = measure(spec.env_id, spec.difficulty, agent, "reference", spec.tasks,
                      spec.attempt_seed(j), split=spec.split, faults=True,
                      env_kwargs=dict(spec.env_kwargs))
        successes += row.successes
        scored += row.scored
    return successes, scored


def scripted_references(spec: TaskSetSpec, cache_path: Path | None = None) -> list[ReferenceRow]:
    """Floor and ceiling rows of ``spec`` (played, or read from ``cache_path`` when cached there
    under :meth:`TaskSetSpec.cache_key`)."""
    key = spec.cache_key()
    cache: dict[str, Any] = {}
    if cache_path is not None and cache_path.is_file():
        try:
            cache = json.loads(cache_path.read_text())
        except json.JSONDecodeError:
            cache = {}
    if key not in cache:
        ceiling, floors = agents_of(spec.env_id)
        cache[key] = {a: list(play(spec, a)) for a in (ceiling, *floors)}
        if cache_path is not None:
            cache_path.write_text(json.dumps(cache, indent=1, sort_keys=True))
    counts = {a: (int(k), int(n)) for a, (k, n) in cache[key].items()}
    ceiling, floors = agents_of(spec.env_id)
    best_floor = max(floors, key=lambda a: (counts[a][0] / max(counts[a][1], 1), -floors.index(a)))
    return [
        ReferenceRow("program-blind floor", f"{best_floor} (best of {', '.join(floors)})", *counts[best_floor]),
        ReferenceRow("oracle ceiling", ceiling, *counts[ceiling]),
    ]


def start_model_rows(runs: Sequence[Run]) -> list[ReferenceRow]:
    """One row per distinct (start model path, success) of ``runs`` (one row when the comparison is fair)."""
    rows = []
    seen = set()
    for r in runs:
        p = r.summary.get(mk.START_MODEL_SUCCESS)
        item = (str(r.summary.get(mk.START_MODEL_PATH)), p)
        if item in seen:
            continue
        seen.add(item)
        n = int(config_get(r.config, "eval.tasks")) * int(config_get(r.config, "eval.samples_per_task"))
        if p is None or not math.isfinite(float(p)):
            rows.append(ReferenceRow("start model", Path(item[0]).name or "(none)", 0, 0))
        else:
            rows.append(ReferenceRow("start model", Path(item[0]).name or "(none)", round(float(p) * n), n, float(p)))
    return rows


def reference_rows(runs: Sequence[Run], sweep_dir: Path | None) -> tuple[list[ReferenceRow], TaskSetSpec | None]:
    """Start model + floor + ceiling rows for one env's runs, and the task-set spec used (``None``
    and only the start-model rows for an env without scripted agents)."""
    spec = task_set_spec(runs[0])
    rows = start_model_rows(runs)
    if spec is not None:
        rows += scripted_references(spec, None if sweep_dir is None else sweep_dir / CACHE_FILE)
    return rows, spec


REFERENCE_COLUMNS = ("row", "agent / model", "held-out success", "95% interval", "attempts")
