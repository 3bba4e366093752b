"""experiments.claims.tagged: a test tagged ``@pytest.mark.claim(ID)`` is its claim's row. Planted
tagged tests (a right number, a wrong one, a crash, a claim without a test) give PASS, FAIL with
the failure, FAIL with the exception, and a FAIL row in the entry point's table."""

from __future__ import annotations

import pytest

from experiments import reproduce_claims as rc
from experiments.claims.tagged import run_tagged, show

PLANTED = '''
from dataclasses import dataclass
from typing import ClassVar

import pytest

from experiments.claims.tagged import claim  # noqa: F401


@dataclass(frozen=True)
class Quarter:
    what: ClassVar[str] = "one number"
    value: float

    @property
    def measured(self) -> str:
        return f"value {self.value}"


@pytest.mark.claim("C1")
def test_right(claim):
    """A right number."""
    m = claim.measure(lambda: Quarter(0.25))
    claim.expect("value", m.value, 0.25)  # 1 / 4
    claim.note("and a note")


@pytest.mark.claim("C2")
def test_wrong(claim):
    """A wrong number."""
    m = claim.measure(lambda: Quarter(0.25))
    claim.expect("value", m.value, 0.5)


@pytest.mark.claim("C3")
def test_crash(claim):
    claim.measure(lambda: 1 / 0)


def test_untagged():
    assert False
'''


@pytest.fixture
def planted(tmp_path):
    path = tmp_path / "test_planted_claims.py"
    path.write_text(PLANTED)
    return path


def test_a_tagged_test_s_outcome_and_texts_are_its_row(planted):
    rows = run_tagged(path=planted)
    assert list(rows) == ["C1", "C2", "C3"]  # the untagged test is not a claim
    right, wrong, crash = rows.values()
    assert (right.claim, right.what, right.expected, right.measured, right.status) == (
        "A right number.", "one number", "value 0.25; and a note", "value 0.25", "PASS")
    assert wrong.status == "FAIL" and wrong.expected == "value 0.5"
    assert wrong.measured.startswith("value 0.25; FAILED call: AssertionError: C2 value: measured 0.25, expected 0.5")
    assert crash.status == "FAIL" and crash.measured == "check raised ZeroDivisionError: division by zero"
    assert list(run_tagged(["C2"], path=planted)) == ["C2"]


def test_main_turns_tagged_tests_into_rows_and_fails_on_a_fail(planted, monkeypatch, capsys):
    monkeypatch.setattr(rc, "run_tagged", lambda ids: run_tagged(ids, path=planted))
    assert rc.main({"C1": rc.TAGGED, "C2": rc.TAGGED, "C4": rc.TAGGED}) == 1
    out = capsys.readouterr().out
    assert "| C1 | one number | value 0.25; and a note | value 0.25 | PASS |" in out
    assert "| C2 | one number | value 0.5 | value 0.25; FAILED call: AssertionError: C2 value" in out
    assert "| C4 |  |  | no test tagged claim('C4') in tests/claims/test_closed_form.py | FAIL |" in out
    assert out.strip().splitlines()[-1] == "closed-form: 1/3 PASS, empirical: 0/0 PASS, optional: 0"
    assert rc.main({"C1": rc.TAGGED}) == 0


def test_a_claim_on_two_tests_or_a_broken_file_is_refused(tmp_path, monkeypatch, capsys):
    twice = tmp_path / "test_twice.py"
    twice.write_text('import pytest\n\n\n@pytest.mark.claim("C1")\ndef test_a():\n    pass\n\n\n'
                     '@pytest.mark.claim("C1")\ndef test_b():\n    pass\n')
    with pytest.raises(RuntimeError, match="claim 'C1' is tagged on two tests"):
        run_tagged(path=twice)
    broken = tmp_path / "test_broken.py"
    broken.write_text("def test_(:\n")
    with pytest.raises(RuntimeError, match="did not run"):
        run_tagged(path=broken)
    monkeypatch.setattr(rc, "run_tagged", lambda ids: run_tagged(ids, path=broken))
    assert rc.main({"C1": rc.TAGGED}) == 1  # a FAIL row, not a crash
    assert "| C1 |  |  | check raised RuntimeError: the claims' tests in " in capsys.readouterr().out


def test_the_claim_fixture_needs_a_claim_mark(tmp_path):
    path = tmp_path / "test_unmarked.py"
    path.write_text("import pytest\nfrom experiments.claims.tagged import claim  # noqa: F401\n\n\n"
                    "@pytest.mark.claim\ndef test_no_id(claim):\n    pass\n")
    assert run_tagged(path=path) == {}  # a mark without an ID tags no claim


def test_show_prints_expected_values():
    assert show([-0.7, 0.4, 0.9]) == "[-0.7, 0.4, 0.9]" and show(2.0) == "2" and show(2 / 3) == "0.6667"
    assert show((True, False)) == "[True, False]" and show("14.9%") == "14.9%" and show([-1, 1]) == "[-1, 1]"
