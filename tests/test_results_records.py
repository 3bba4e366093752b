"""docs/results.md quotes what the committed run records give: the off-policy map's 32-decision cells
kept under docs/data/offpolicy/n32* (``python -m experiments.report.archive``; one directory per
machine, each with its own baseline run) re-rendered here must give the table's differences at
equal rollouts and each baseline's final success, digit for digit, so a number in the page cannot
drift from the runs it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from algos import metric_keys as mk
from experiments.report.offpolicy import BASELINE, against_baseline, comparison_text, load_offpolicy
from experiments.report.stats import fmt_seeds

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.md"
RECORDS = sorted((ROOT / "docs" / "data" / "offpolicy").glob("n32*"))
TABLE = "| 32 decisions, setting - baseline, equal rollouts"
METHODS = ("grpo", "ppo_long")
CORRECTION_WORDS = {"none": "no correction", "decoupled": "`decoupled` (token TIS)", "token-mask": "`token-mask`"}


@pytest.fixture(scope="module", params=RECORDS, ids=lambda d: d.name)
def cells(request):
    return load_offpolicy([request.param], METHODS)


def test_each_records_directory_holds_other_settings():
    settings = [c.setting for d in RECORDS for c in load_offpolicy([d], METHODS) if c.setting != BASELINE]
    assert RECORDS and len(settings) == len(set(settings))


def table_rows() -> dict[str, list[str]]:
    """The 32-decision off-policy table of results.md: row label -> its cells."""
    lines = RESULTS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(TABLE))
    rows = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        parts = [p.strip() for p in line.strip("|").split("|")]
        rows[parts[0]] = parts[1:]
    return rows


def label(setting) -> str:
    dtype = ", bfloat16 sampler" if setting.sampler_dtype == "bfloat16" else ""
    return f"staleness {setting.staleness}{dtype}, {CORRECTION_WORDS[setting.correction]}"


def test_the_records_hold_the_baseline_and_complete_cells(cells):
    assert {c.horizon for c in cells} == {32}
    assert any(c.setting == BASELINE for c in cells)
    for c in cells:  # every cell: both methods, seeds 0-4
        assert {m: [r.seed for r in c.by_method[m]] for m in METHODS} == {m: [0, 1, 2, 3, 4] for m in METHODS}, c.cell_dir


def test_the_32_decision_table_quotes_the_records(cells):
    rows = table_rows()
    base = next(c for c in cells if c.setting == BASELINE)
    for cell in cells:
        if cell.setting == BASELINE:
            continue
        quoted = rows[label(cell.setting)]
        assert f"`{cell.cell_dir.parent.name}`" in quoted[-1], (cell.setting, "the row names its records directory")
        for i, method in enumerate(METHODS):
            at_rollouts = against_baseline(cell, base, method)[0]
            assert at_rollouts.axis == mk.COMPUTE_ROLLOUTS
            # the page writes the verdict in lower case and leaves "inconclusive" out
            expected = comparison_text(at_rollouts).removesuffix(" inconclusive").lower()
            assert quoted[i].lower() == expected, (cell.setting, method)


def test_the_baseline_success_quoted_is_the_records(cells):
    base = next(c for c in cells if c.setting == BASELINE)
    text = RESULTS.read_text()
    for method in METHODS:
        assert fmt_seeds([r.summary[mk.EVAL_SUCCESS] for r in base.by_method[method]]) in text
