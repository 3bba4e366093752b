"""docs/claims.md's closed-form table is the output of ``python -m experiments.reproduce_claims
--docs``: the rows of the tagged tests of tests/claims/test_closed_form.py, written between the
page's two marker lines. Here the command runs on a copy of the page with a planted drift, and
must give back the page as it is."""

from __future__ import annotations

from pathlib import Path

import pytest

from entry import run_entry
from experiments import reproduce_claims as rc

REPO = Path(__file__).resolve().parents[2]


def test_docs_claims_table_is_the_closed_form_rows(tmp_path):
    page = rc.DOCS.read_text()
    assert rc.DOCS_BEGIN in page and rc.DOCS_END in page
    drifted = page.replace(" | PASS |", " | FAIL |", 1)
    assert drifted != page  # the page holds the table's rows
    copy = tmp_path / "claims.md"
    copy.write_text(drifted)
    done = run_entry("experiments.reproduce_claims", ["--docs", str(copy)], cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"wrote the closed-form table into {copy}" in done.stdout
    assert copy.read_text() == page, ("docs/claims.md's closed-form table is not what the tagged tests give: "
                                      "run python -m experiments.reproduce_claims --docs")


def test_the_table_goes_between_the_markers_and_nowhere_else(tmp_path):
    text = f"# T\n\nbefore\n{rc.DOCS_BEGIN}\nold row\n{rc.DOCS_END}\nafter\n"
    want = f"# T\n\nbefore\n{rc.DOCS_BEGIN}\n| a |\n| b |\n{rc.DOCS_END}\nafter\n"
    assert rc.with_docs_table(text, "| a |\n| b |") == want
    begin, end = rc.DOCS_BEGIN, rc.DOCS_END
    for bad in ("no markers\n", f"{end}\n{begin}\n", f"{begin}\n{begin}\n{end}\n"):
        with pytest.raises(ValueError, match="once each, in that order"):
            rc.with_docs_table(bad, "| a |")
    page = tmp_path / "page.md"
    page.write_text("no markers\n")
    with pytest.raises(SystemExit) as e:  # refused before any row runs
        rc.main(argv=["--docs", str(page)])
    assert e.value.code == 2 and page.read_text() == "no markers\n"
