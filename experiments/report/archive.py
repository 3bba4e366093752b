"""Run records: the part of a run directory the reports read, small enough to keep in a repository.

    python -m experiments.report.archive SRC [SRC ...] --out DST

Every finished run directory under each ``SRC`` (:func:`experiments.report.load.find_run_dirs`,
each read and validated by :func:`experiments.report.load.load_run` first) becomes the record
``DST/<SRC's name>/<the run's path below SRC>/`` holding its ``config.yaml`` and ``summary.json``
byte for byte and its ``metrics.jsonl`` gzipped as ``metrics.jsonl.gz`` (no timestamp in the
gzip header, so one run always gives the same bytes); checkpoints, transcripts and wandb files are
left out. The reports read a record as they read a run directory, so
``python -m experiments.report.offpolicy DST/...`` renders from records, alone or beside live
cells. An unfinished run (no ``summary.json``) is not a run directory and is skipped. A record is
written once: one that exists with the run's ``config.yaml`` and metrics is kept as it is (resuming
a finished run rewrites only its summary's process clocks), and one that holds another run (other
config or metrics) is an error naming it, before anything is written.
"""

from __future__ import annotations

import argparse
import gzip
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.report.keys import ARCHIVED_METRICS, RUN_FILES, ReportError
from experiments.report.load import find_run_dirs, load_run

#: the files copied byte for byte into a record
COPIED = RUN_FILES[1:]
#: the files that say which run a record holds
IDENTITY = (RUN_FILES[1], ARCHIVED_METRICS)


@dataclass(frozen=True)
class Record:
    """One run directory and the record it becomes: the record's files and their bytes."""

    run_dir: Path
    record_dir: Path
    files: dict[str, bytes]

    @property
    def size(self) -> int:
        return sum(len(b) for b in self.files.values())


def record_of(run_dir: Path, record_dir: Path) -> Record:
    """The record of one run directory (validated first; ``ReportError`` when it breaks the contract)."""
    load_run(run_dir)
    files = {name: (run_dir / name).read_bytes() for name in COPIED}
    files[ARCHIVED_METRICS] = gzip.compress((run_dir / RUN_FILES[0]).read_bytes(), compresslevel=9, mtime=0)
    return Record(run_dir, record_dir, files)


def plan(sources: Sequence[str | Path], out: str | Path) -> list[Record]:
    """The records to write of every run directory under ``sources`` into ``out``, leaving out
    those already written for the same run; ``ReportError`` when a source is not a directory, holds
    no finished run, two runs map to one record, or a record on disk holds another run."""
    records: dict[Path, Record] = {}
    for src in map(Path, sources):
        if not src.is_dir():
            raise ReportError(f"{src} is not a directory; allowed: directories holding run directories")
        runs = [d for d in find_run_dirs(src) if (d / RUN_FILES[0]).is_file()]
        if not runs:
            raise ReportError(f"no finished run directory (with {', '.join(RUN_FILES)}) under {src}")
        for run in runs:
            target = Path(out) / src.resolve().name / run.relative_to(src)
            if target.resolve() in records:
                raise ReportError(f"{run} and {records[target.resolve()].run_dir} would both be recorded at {target}")
            records[target.resolve()] = record_of(run, target)
    return [r for r in records.values() if not written(r)]


def written(r: Record) -> bool:
    """Whether ``r``'s record exists for the same run; ``ReportError`` when it holds another run."""
    if not all((r.record_dir / name).is_file() for name in IDENTITY):
        return False
    for name in IDENTITY:
        if (r.record_dir / name).read_bytes() != r.files[name]:
            raise ReportError(f"record {r.record_dir / name} holds another run than {r.run_dir}; allowed: a new "
                              "--out or removing that record first")
    return True


def write(records: Sequence[Record]) -> None:
    for r in records:
        r.record_dir.mkdir(parents=True, exist_ok=True)
        for name, data in r.files.items():
            (r.record_dir / name).write_bytes(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.report.archive", description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="+", metavar="SRC", help="directories holding run directories (cells, sweeps)")
    parser.add_argument("--out", required=True, metavar="DST", help="the directory the records go under")
    args = parser.parse_args(argv)
    try:
        records = plan(args.sources, args.out)
    except ReportError as e:
        print(f"archive: {e}", file=sys.stderr)
        return 2
    write(records)
    for r in records:
        print(f"{r.run_dir} -> {r.record_dir} ({r.size / 1024:.1f} KiB)")
    print(f"{len(records)} new run records, {sum(r.size for r in records) / 1024:.1f} KiB, under {args.out}",
          file=sys.stderr)
    return 0


__all__ = ["COPIED", "IDENTITY", "Record", "main", "plan", "record_of", "write", "written"]


if __name__ == "__main__":
    sys.exit(main())
