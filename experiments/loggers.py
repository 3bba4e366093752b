"""Experiment loggers: one small interface, two implementations, chosen by name.

``make_logger(kind, run_dir, name, group, job_type, config)`` returns a :class:`Logger`:

- ``"wandb"`` -> :class:`WandbLogger`: a Weights & Biases run, **offline by default** (nothing is
  sent, no account and no login prompt: ``mode="offline"`` plus ``WANDB_MODE=offline`` /
  ``WANDB_SILENT=true`` set before ``wandb.init``). Files go to ``<run_dir>/wandb/offline-run-*``;
  ``wandb sync`` can upload them later if anyone wants to. ``group`` is the sweep name (all runs of
  one comparison share it), ``job_type`` the algorithm (``grpo`` / ``ppo``), ``config`` is logged
  flat with dotted keys (``algo.group_size``), so runs can be filtered by any config field.
- ``"none"`` -> :class:`NoneLogger`: a real class that accepts every call and does nothing.

The interface (what ``experiments/train.py`` and ``experiments/compare.py`` call):

``define_x_axes(step_metric="compute/rollouts", axes=COMPUTE_AXES)``
    Declares the compute counters as x-axes (``wandb.define_metric``). Each counter in ``axes``
    is defined as its own metric; every other namespace (``rollout/*``, ``train/*``,
    ``critic/*``, ``eval/*``, ``env/*``) is defined with the glob form
    ``define_metric("<ns>/*", step_metric=step_metric)``, so W&B plots it against the chosen
    compute counter by default, and the other counters are selectable as x-axis in the UI.
    (wandb accepts a ``*`` only as a suffix of the name; an explicit name wins over a glob.)
``log(metrics)``
    One namespaced dict per update (the same dict that goes to ``metrics.jsonl``).
``log_images({name: png_path})``, ``log_table(name, columns, rows)``, ``finish()``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: The compute counters (cumulative, monotone) that serve as x-axes; see docs/interfaces.md.
COMPUTE_AXES: tuple[str, ...] = (
    "compute/rollouts",
    "compute/generated_tokens",
    "compute/observation_tokens",
    "compute/tool_seconds",
    "compute/train_flops",
    "compute/wall_seconds",
)

#: Metric namespaces plotted against the step metric (``compute/*`` counters are the axes).
PLOTTED_NAMESPACES: tuple[str, ...] = ("rollout", "train", "critic", "eval", "env")

#: The project name of every W&B run of this harness.
WANDB_PROJECT = "agent-rl-harness"


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"algo": {"group_size": 8}}`` -> ``{"algo.group_size": 8}`` (lists stay values).

    An OmegaConf ``DictConfig`` is resolved to plain containers first.
    """
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(config, DictConfig):
            config = OmegaConf.to_container(config, resolve=True)
    except ImportError:  # pragma: no cover - hydra-core is a dependency
        pass
    flat: dict[str, Any] = {}
    for key, value in config.items():
        full = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_config(value, prefix=f"{full}."))
        else:
            flat[full] = value
    return flat


class Logger:
    """The logger interface. Subclasses implement every method; this base documents them."""

    kind: str = "base"

    def define_x_axes(
        self, step_metric: str = "compute/rollouts", axes: Sequence[str] = COMPUTE_AXES
    ) -> None:
        raise NotImplementedError

    def log(self, metrics: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        raise NotImplementedError

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> "Logger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


class NoneLogger(Logger):
    """Accepts every call and records nothing (``logger=none``)."""

    kind = "none"

    def __init__(self, run_dir: str | Path | None = None, **_: Any) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None

    def define_x_axes(
        self, step_metric: str = "compute/rollouts", axes: Sequence[str] = COMPUTE_AXES
    ) -> None:
        _check_axes(step_metric, axes)

    def log(self, metrics: Mapping[str, Any]) -> None:
        return None

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        return None

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        return None

    def finish(self) -> None:
        return None


class WandbLogger(Logger):
    """A W&B run written under ``<run_dir>/wandb``; offline unless ``mode`` says otherwise.

    ``mode`` is ``"offline"`` by default; ``"disabled"`` is also accepted. ``"online"`` is only
    used when asked for explicitly (this harness never needs it).
    """

    kind = "wandb"

    def __init__(
        self,
        run_dir: str | Path,
        name: str,
        group: str | None,
        job_type: str | None,
        config: Mapping[str, Any],
        mode: str = "offline",
        project: str = WANDB_PROJECT,
    ) -> None:
        if mode != "online":
            # Set before importing/initialising wandb: no network, no login prompt, no banner.
            os.environ["WANDB_MODE"] = mode
            os.environ.setdefault("WANDB_SILENT", "true")
            os.environ.setdefault("WANDB_DISABLE_GIT", "true")
            os.environ.setdefault("WANDB_CONSOLE", "off")
        import wandb

        self._wandb = wandb
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=project,
            name=name,
            group=group,
            job_type=job_type,
            dir=str(self.run_dir),
            mode=mode,
            config=flatten_config(config),
            reinit="create_new",
            settings=wandb.Settings(
                silent=True,
                console="off",
                x_disable_stats=True,
                x_disable_meta=True,
                save_code=False,
                disable_git=True,
            ),
        )
        self._finished = False

    @property
    def wandb_dir(self) -> Path:
        """The run's own directory (``<run_dir>/wandb/offline-run-<date>-<id>``)."""
        return Path(self.run.dir).parent

    def define_x_axes(
        self, step_metric: str = "compute/rollouts", axes: Sequence[str] = COMPUTE_AXES
    ) -> None:
        _check_axes(step_metric, axes)
        for axis in axes:
            self.run.define_metric(axis)
        for ns in PLOTTED_NAMESPACES:
            self.run.define_metric(f"{ns}/*", step_metric=step_metric)

    def log(self, metrics: Mapping[str, Any]) -> None:
        self.run.log(dict(metrics))

    def log_images(self, images: Mapping[str, str | Path]) -> None:
        payload = {}
        for name, path in images.items():
            path = Path(path)
            if not path.is_file():
                raise FileNotFoundError(f"log_images: {name!r} -> {path} does not exist")
            payload[name] = self._wandb.Image(str(path), caption=path.name)
        if payload:
            self.run.log(payload)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        columns = list(columns)
        for i, row in enumerate(rows):
            if len(row) != len(columns):
                raise ValueError(
                    f"log_table({name!r}): row {i} has {len(row)} values, expected {len(columns)}"
                )
        table = self._wandb.Table(columns=columns, data=[list(r) for r in rows])
        self.run.log({name: table})

    def finish(self) -> None:
        if not self._finished:
            self._finished = True
            self.run.finish()


LOGGERS: dict[str, type[Logger]] = {"wandb": WandbLogger, "none": NoneLogger}


def _check_axes(step_metric: str, axes: Sequence[str]) -> None:
    if isinstance(axes, str):
        raise TypeError("axes must be a sequence of metric names, not one string")
    for axis in axes:
        if not axis.startswith("compute/"):
            raise ValueError(f"x-axis {axis!r} is not a compute counter (compute/*)")
    if step_metric not in axes:
        raise ValueError(f"step_metric {step_metric!r} must be one of the axes {list(axes)}")


def make_logger(
    kind: str,
    run_dir: str | Path,
    name: str,
    group: str | None = None,
    job_type: str | None = None,
    config: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Logger:
    """The logger named ``kind`` (``wandb`` or ``none``); ``ValueError`` lists the valid kinds.

    ``kwargs`` go to the logger class (``mode=``/``project=`` for wandb).
    """
    if kind not in LOGGERS:
        raise ValueError(f"unknown logger kind {kind!r}; allowed: {', '.join(sorted(LOGGERS))}")
    if kind == "none":
        return NoneLogger(run_dir=run_dir)
    return LOGGERS[kind](
        run_dir=run_dir, name=name, group=group, job_type=job_type, config=dict(config or {}), **kwargs
    )


# ---------------------------------------------------------------------------------------------
# Reading an offline run back (tests, and checking what would be synced without syncing it)
# ---------------------------------------------------------------------------------------------
_LOG_BLOCK = 32768
_LOG_HEADER = 7  # crc32 (uint32) + length (uint16) + type (uint8), little-endian
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def read_wandb_records(path: str | Path, strict: bool = True) -> list[Any]:
    """The protobuf ``Record``s of a ``run-<id>.wandb`` transaction log, in order.

    The file is a LevelDB-style log (github.com/google/leveldb/blob/main/doc/log_format.md):
    a 7-byte file header (``:W&B``, magic 0xBEE1, version 0), then 32 KiB blocks of chunks
    ``crc32(type+data) | len | type | data`` where a record is one FULL chunk or
    FIRST, MIDDLE*, LAST. Every chunk's checksum is verified (zlib crc32 of type byte + data).
    The installed wandb (0.31) no longer ships a Python reader, so this is the reader.

    wandb-core writes the file asynchronously: right after ``finish()`` its tail may still be
    in flight. ``strict=False`` returns the complete records before an incomplete last chunk
    instead of raising (a checksum mismatch of a complete chunk always raises).
    """
    import struct
    import zlib

    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:7].ljust(7, b"\x00"))
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise ValueError(f"{path} is not a W&B transaction log (header {data[:7]!r})")
    pos, pending, records = 7, b"", []
    while pos + _LOG_HEADER <= len(data):
        left = _LOG_BLOCK - pos % _LOG_BLOCK
        if left < _LOG_HEADER:  # block trailer padding
            pos += left
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + _LOG_HEADER])
        if kind == 0 and length == 0:  # zero padding up to the block end
            pos += left
            continue
        chunk = data[pos + _LOG_HEADER : pos + _LOG_HEADER + length]
        if len(chunk) < length:
            if not strict:
                break
            raise ValueError(f"{path}: truncated chunk at byte {pos}")
        if zlib.crc32(bytes([kind]) + chunk) & 0xFFFFFFFF != crc:
            raise ValueError(f"{path}: checksum mismatch at byte {pos}")
        pos += _LOG_HEADER + length
        if kind == _FULL:
            payload = chunk
        elif kind == _FIRST:
            pending = chunk
            continue
        elif kind == _MIDDLE:
            pending += chunk
            continue
        elif kind == _LAST:
            payload, pending = pending + chunk, b""
        else:
            raise ValueError(f"{path}: unknown chunk type {kind} at byte {pos}")
        record = pb.Record()
        record.ParseFromString(payload)
        records.append(record)
    if strict and (pending or data[pos:].strip(b"\x00")):
        raise ValueError(f"{path}: truncated record at the end (byte {pos})")
    return records


def offline_run_contents(run_wandb_dir: str | Path, wait_seconds: float = 30.0) -> dict[str, Any]:
    """Decode an offline run directory (``.../wandb/offline-run-*``) into plain Python.

    Returns ``run`` (name, group, job_type, project), ``config`` (flat dict), ``metrics``
    (define_metric records: ``{name or glob: step_metric}``), ``history`` (one dict per
    ``log`` call, nested keys joined with ``.``), and ``exit_code`` (``None`` if the run never
    finished). Waits up to ``wait_seconds`` for the exit record (wandb-core may still be
    writing the file's tail right after ``finish()``).
    """
    import time

    files = sorted(Path(run_wandb_dir).glob("run-*.wandb"))
    if len(files) != 1:
        raise FileNotFoundError(f"expected one run-*.wandb file in {run_wandb_dir}, found {files}")
    deadline = time.monotonic() + wait_seconds
    while True:
        records = read_wandb_records(files[0], strict=False)
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    out: dict[str, Any] = {"run": {}, "config": {}, "metrics": {}, "history": [], "exit_code": None}
    for rec in records:
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            out["run"] = {"name": r.display_name, "group": r.run_group, "job_type": r.job_type,
                          "project": r.project, "id": r.run_id}
            for item in r.config.update:
                if not item.key.startswith("_"):
                    out["config"][item.key] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                if not item.key.startswith("_"):
                    out["config"][item.key] = json.loads(item.value_json)
        elif kind == "metric":
            m = rec.metric
            out["metrics"][m.name or m.glob_name] = m.step_metric or None
        elif kind == "history":
            row = {}
            for item in rec.history.item:
                key = ".".join(item.nested_key) if item.nested_key else item.key
                row[key] = json.loads(item.value_json)
            out["history"].append(row)
        elif kind == "exit":
            out["exit_code"] = rec.exit.exit_code
    return out
