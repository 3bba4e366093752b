"""The run directory: resolved config, metrics log, atomic checkpoint, resume with truncation.

Layout of ``<run_dir>``::

    config.yaml            the resolved config of the run
    metrics.jsonl          one JSON dict per update, flushed and fsynced as it is written
    summary.json           the final summary
    checkpoints/last.pt    the state after the last finished update (written atomically)
    wandb/                 the logger's offline files

Resume contract: every checkpoint records the byte length of ``metrics.jsonl`` at the moment it
was written. :meth:`RunDir.resume` loads the checkpoint and truncates ``metrics.jsonl`` back to
that length, so a process killed between an update's metrics line and its checkpoint (or in the
middle of writing the line) redoes that update and writes the line once.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
from pathlib import Path

import torch
from omegaconf import OmegaConf

from experiments.runtime.schema import TrainConfig, fingerprint


def atomic_save(obj, path: Path) -> None:
    """``torch.save`` to ``path`` through a fsynced temporary file and an atomic rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as fh:
        torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and an atomic rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive ``flock`` on ``path`` (created with its directory) for the ``with`` block: the
    concurrent jobs of a sweep that need one cached artefact (a warm start) build it once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def config_hash(c: TrainConfig, length: int = 10) -> str:
    """Hex digest of the config's :func:`~experiments.runtime.schema.fingerprint` (operational fields
    such as ``run_dir``, ``logger`` or ``threads`` left out by their field metadata)."""
    blob = json.dumps(fingerprint(c), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


def default_run_dir(c: TrainConfig) -> Path:
    """``run_dir`` when set, else ``<runs_root>/<algo>-<env>-<config hash>`` (same command, same dir)."""
    if c.run_dir:
        return Path(c.run_dir)
    return Path(c.runs_root) / f"{c.algo.name}-{c.env.name}-{config_hash(c)}"


class RunDir:
    """One run's directory (see the module docstring for the layout and the resume contract)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.metrics_path = self.path / "metrics.jsonl"
        self.checkpoint_path = self.path / "checkpoints" / "last.pt"

    @classmethod
    def create(cls, c: TrainConfig) -> "RunDir":
        """The run directory of ``c`` (:func:`default_run_dir`), created if missing."""
        rd = cls(default_run_dir(c))
        rd.checkpoint_path.parent.mkdir(parents=True, exist_ok=True)
        return rd

    def write_config(self, resolved: dict) -> None:
        atomic_write_text(self.path / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(resolved)))

    def append_metrics(self, metrics: dict) -> None:
        """Append one JSON line (non-finite floats as null) and fsync it."""
        with open(self.metrics_path, "a") as fh:
            fh.write(json.dumps(jsonable(metrics)) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def metrics(self) -> list[dict]:
        """Every metrics line written so far."""
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines()]

    def save_checkpoint(self, state: dict) -> None:
        """Atomically write ``state`` plus the current length of metrics.jsonl."""
        size = self.metrics_path.stat().st_size if self.metrics_path.exists() else 0
        atomic_save({**state, "metrics_bytes": size}, self.checkpoint_path)

    def resume(self) -> dict | None:
        """The last checkpoint's state with metrics.jsonl truncated to the length it recorded, or
        ``None`` (and a fresh metrics.jsonl) when there is no checkpoint."""
        if not self.checkpoint_path.exists():
            self.start_fresh()
            return None
        state = torch.load(self.checkpoint_path, map_location="cpu", weights_only=False)
        if self.metrics_path.exists():
            with open(self.metrics_path, "r+b") as fh:
                fh.truncate(state["metrics_bytes"])
        return state

    def start_fresh(self) -> None:
        """Forget earlier metrics (a run that does not resume starts its log over)."""
        if self.metrics_path.exists():
            self.metrics_path.unlink()

    def write_summary(self, summary: dict) -> None:
        atomic_write_text(self.path / "summary.json", json.dumps(jsonable(summary), indent=2))


def jsonable(d: dict) -> dict:
    """Tensors to Python numbers and non-finite floats to ``None`` (JSON has no NaN)."""
    out = {}
    for k, v in d.items():
        if isinstance(v, torch.Tensor):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


__all__ = ["RunDir", "atomic_save", "atomic_write_text", "config_hash", "default_run_dir", "jsonable"]
