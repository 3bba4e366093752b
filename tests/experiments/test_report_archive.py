"""Run records (``python -m experiments.report.archive``): a run directory's config, summary and
gzipped metrics, read by the reports as the run itself."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from entry import run_entry
from experiments import report as R
from experiments.report import ReportError
from experiments.report.load import find_run_dirs, load_run

from report_fixtures import make_sweep, write_run


def _archive(*args) -> object:
    return run_entry("experiments.report.archive", [str(a) for a in args])  # in this process (tests/entry.py)


def test_a_record_reads_as_its_run(tmp_path):
    src = make_sweep(tmp_path / "sweep")  # 6 runs under sweep/bugfix/<n>, and a metrics file alone
    out = _archive(src, "--out", tmp_path / "records")
    assert out.returncode == 0, out.stderr
    runs = find_run_dirs(src)
    records = find_run_dirs(tmp_path / "records")
    assert len(runs) == len(records) == 6  # not_a_run/ (no config, no summary) is no run
    for run_dir, record_dir in zip(runs, records):
        assert record_dir == tmp_path / "records" / "sweep" / run_dir.relative_to(src)
        assert sorted(p.name for p in record_dir.iterdir()) == ["config.yaml", "metrics.jsonl.gz", "summary.json"]
        assert gzip.decompress((record_dir / "metrics.jsonl.gz").read_bytes()) == (run_dir / "metrics.jsonl").read_bytes()
        run, record = load_run(run_dir), load_run(record_dir)
        assert (record.algo, record.env, record.seed) == (run.algo, run.env, run.seed)
        assert (record.metrics, record.summary, record.config) == (run.metrics, run.summary, run.config)
    assert str(records[0]) in out.stdout and "6 new run records" in out.stderr


def test_a_report_from_records_is_the_report_from_the_runs(tmp_path):
    src = make_sweep(tmp_path / "sweep", envs=("bugfix", "long_horizon"))
    assert _archive(src, "--out", tmp_path / "records").returncode == 0
    from_runs = R.render_report(src, references=False)
    from_records = R.render_report(tmp_path / "records" / "sweep", references=False)
    assert len(from_records.runs) == 12
    assert from_records.rows == from_runs.rows
    assert from_records.markdown.replace(str(tmp_path / "records" / "sweep"), str(src)) == from_runs.markdown


def test_records_are_the_same_bytes_every_time_and_rearchiving_is_a_no_op(tmp_path):
    src = make_sweep(tmp_path / "sweep")
    assert _archive(src, "--out", tmp_path / "a").returncode == 0
    assert _archive(src, "--out", tmp_path / "b").returncode == 0
    again = _archive(src, "--out", tmp_path / "a")  # the same runs: nothing to write, nothing to refuse
    assert again.returncode == 0 and again.stdout == "" and "0 new run records" in again.stderr
    a = sorted(p for p in (tmp_path / "a").rglob("*") if p.is_file())
    b = sorted(p for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert [p.relative_to(tmp_path / "a") for p in a] == [p.relative_to(tmp_path / "b") for p in b]
    assert all(x.read_bytes() == y.read_bytes() for x, y in zip(a, b))  # gzip header without a timestamp


def test_a_resumed_run_keeps_its_record_and_another_run_is_refused_before_anything_is_written(tmp_path):
    src = make_sweep(tmp_path / "sweep")
    assert _archive(src, "--out", tmp_path / "records").returncode == 0
    record = tmp_path / "records" / "sweep" / "bugfix" / "0"
    first = (record / "summary.json").read_bytes()
    summary = src / "bugfix" / "0" / "summary.json"  # resuming a finished run rewrites its process clock
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "wall_seconds_this_process": 0.002}))
    write_run(src / "bugfix" / "new", "grpo", "bugfix", 0)  # a new run: a new record
    out = _archive(src, "--out", tmp_path / "records")
    assert out.returncode == 0 and "1 new run records" in out.stderr
    assert (record / "summary.json").read_bytes() == first and (tmp_path / "records" / "sweep" / "bugfix" / "new").is_dir()

    metrics = src / "bugfix" / "1" / "metrics.jsonl"  # another run at the same place: other metrics
    metrics.write_text(metrics.read_text().replace('"rollout/mixed_group_rate": 0.5', '"rollout/mixed_group_rate": 0.25'))
    write_run(src / "bugfix" / "newer", "grpo", "bugfix", 1)  # would be a new record
    out = _archive(src, "--out", tmp_path / "records")
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"archive: record {tmp_path / 'records' / 'sweep' / 'bugfix' / '1' / 'metrics.jsonl.gz'} holds another run "
        f"than {src / 'bugfix' / '1'}; allowed: a new --out or removing that record first"]
    assert not (tmp_path / "records" / "sweep" / "bugfix" / "newer").exists()


def test_unfinished_runs_are_left_out_and_bad_sources_are_one_line(tmp_path):
    src = make_sweep(tmp_path / "sweep")
    (src / "bugfix" / "1" / "summary.json").unlink()  # a run still training: no summary yet
    assert _archive(src, "--out", tmp_path / "records").returncode == 0
    assert len(find_run_dirs(tmp_path / "records")) == 5
    assert not (tmp_path / "records" / "sweep" / "bugfix" / "1").exists()

    missing = tmp_path / "nope"
    out = _archive(missing, "--out", tmp_path / "r2")
    assert out.returncode == 2 and out.stderr.strip() == (
        f"archive: {missing} is not a directory; allowed: directories holding run directories")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = _archive(empty, "--out", tmp_path / "r2")
    assert out.returncode == 2 and out.stderr.strip() == (
        f"archive: no finished run directory (with metrics.jsonl, config.yaml, summary.json) under {empty}")
    broken = tmp_path / "broken"
    write_run(broken / "r", "grpo", "bugfix", 0, drop_metric="compute/rollouts")
    out = _archive(broken, "--out", tmp_path / "r2")
    assert out.returncode == 2 and "is missing required key 'compute/rollouts'" in out.stderr
    assert not (tmp_path / "r2").exists()


def test_a_broken_record_names_its_file_and_line(tmp_path):
    src = make_sweep(tmp_path / "sweep")
    assert _archive(src, "--out", tmp_path / "records").returncode == 0
    record = tmp_path / "records" / "sweep" / "bugfix" / "0"
    lines = gzip.decompress((record / "metrics.jsonl.gz").read_bytes()).decode().splitlines()
    (record / "metrics.jsonl.gz").write_bytes(gzip.compress("\n".join([lines[0], "{not json"]).encode()))
    with pytest.raises(ReportError, match=rf"^{re.escape(str(record / 'metrics.jsonl.gz'))} line 2 is not JSON"):
        load_run(record)
