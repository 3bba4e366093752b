"""Reading an offline W&B run back from its files (tests only): the ``run-<id>.wandb``
transaction log decoded record by record (:func:`read_wandb_records`) and summarised as plain
Python (:func:`offline_run_contents`)."""

from __future__ import annotations

import json
import struct
import time
import zlib
from pathlib import Path
from typing import Any

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
