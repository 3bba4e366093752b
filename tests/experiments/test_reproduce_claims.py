"""experiments.reproduce_claims: the entry point as a user runs it, and the FAIL -> exit 1 rule."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest

from entry import EntryResult, run_entry
from experiments import reproduce_claims as rc
from experiments.claims.result import EMPIRICAL, ClaimResult

REPO = Path(__file__).resolve().parents[2]
CLOSED_FORM = ["C1", "C2", "C3", "C4", "C5", "C15", "C16", "C18", "C25"]
# Empirical rows measured at env level by experiments/claims/envs.py (real envs + scripted agents).
ENV_ROWS = ["C9", "C10", "C11", "C21", "C23", "C24"]
# Empirical rows measured with the rollout engine and trainers by experiments/claims/.
TRAINER_ROWS = ["C6", "C7", "C8", "C12", "C13", "C14", "C17", "C19", "C20"]


def run_entry_point() -> EntryResult:
    """``python -m experiments.reproduce_claims`` as a user runs it, in this process (tests/entry.py:
    no second torch import; the measurements tests/claims/ already made in this worker are reused
    from experiments.claims' caches, the same numbers a fresh process computes)."""
    return run_entry("experiments.reproduce_claims", [], cwd=REPO)


def rows_of(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if cells and cells[0].startswith("C") and cells[0][1:].isdigit():
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow
def test_entry_point_prints_every_claim_and_exits_zero():
    """One run of the entry point (~45 s alone) for every check below: under pytest-xdist separate
    tests could land on separate workers and each pay for their own run."""
    done = run_entry_point()
    check_every_row(done)
    check_env_rows(done)
    check_trainer_rows(done)


def check_every_row(done: EntryResult) -> None:
    assert done.returncode == 0, done.stdout + done.stderr
    rows = rows_of(done.stdout)
    assert list(rows) == [f"C{i}" for i in range(1, 26)]  # every ID, in order
    assert all(len(cells) == 5 for cells in rows.values())
    for cid in CLOSED_FORM:
        assert rows[cid][-1] == "PASS", rows[cid]
    # Every row ran and passed.
    for cid, cells in rows.items():
        assert cells[-1] == "PASS", cells
        assert not cells[3].startswith("needs #"), cells
    assert done.stdout.strip().splitlines()[-1] == "closed-form: 9/9 PASS, empirical: 16/16 PASS, optional: 0"


def test_registry_matches_claim_ids_and_kinds():
    """The closed-form claims are their tagged tests (one per ID, each PASS); the others are
    empirical measurements."""
    assert list(rc.CLAIMS) == [f"C{i}" for i in range(1, 26)]
    assert [cid for cid, m in rc.CLAIMS.items() if m is rc.TAGGED] == CLOSED_FORM
    assert {rc.result_type(m).kind for m in rc.CLAIMS.values() if m is not rc.TAGGED} == {"empirical"}
    rows = rc.closed_form_rows()
    assert list(rows) == CLOSED_FORM
    for cid, row in rows.items():
        assert row.status == rc.PASS and row.kind == "closed-form", (cid, row)
        assert row.claim and row.what and row.expected and row.measured, (cid, row)


def test_every_row_has_its_texts_on_its_result_class():
    for cid, measure in rc.CLAIMS.items():
        if measure is not rc.TAGGED:
            row = rc.result_type(measure)
            assert row.what and row.expected and row.kind == "empirical", cid


@dataclass(frozen=True)
class Rate(ClaimResult):
    """A hand-made result: ``rate`` passes above ``need``."""

    what: ClassVar[str] = "w"
    expected: ClassVar[str] = "e"
    kind: ClassVar[str] = EMPIRICAL

    rate: float
    need: float = 0.5

    def passes(self) -> bool:
        return self.rate > self.need

    @property
    def measured(self) -> str:
        return f"rate {self.rate:.2f}"


@dataclass(frozen=True)
class Wrong(ClaimResult):
    what: ClassVar[str] = "deliberately wrong"
    expected: ClassVar[str] = "never"

    def passes(self) -> bool:
        return False

    @property
    def measured(self) -> str:
        return "measured 0"


@dataclass(frozen=True)
class BadStatus(Wrong):
    what: ClassVar[str] = "bad status"

    def status(self) -> str:
        return "OK"


@dataclass(frozen=True)
class NotRun(Wrong):
    what: ClassVar[str] = "w"
    expected: ClassVar[str] = "e"
    kind: ClassVar[str] = EMPIRICAL

    @property
    def measured(self) -> str:
        return "optional; needs #5 (experiments)"

    def status(self) -> str:
        return rc.OPTIONAL


def wrong() -> Wrong:
    return Wrong()


def crashes() -> Wrong:
    raise RuntimeError("kaput")


def bad_status() -> BadStatus:
    return BadStatus()


def not_run() -> NotRun:
    return NotRun()


def test_a_failing_claim_makes_main_return_one(capsys):
    # the closed-form rows (their tagged tests) with C2 replaced by a failing measurement (the
    # empirical rows run trainers; the entry-point tests cover them)
    claims = {cid: rc.CLAIMS[cid] for cid in CLOSED_FORM}
    claims["C2"] = wrong
    assert rc.main(claims) == 1
    out = capsys.readouterr().out
    assert "| C2 | deliberately wrong | never | measured 0 | FAIL |" in out
    assert "closed-form: 8/9 PASS" in out


def test_a_crashing_or_malformed_check_is_a_fail(capsys):
    assert rc.main({"C1": crashes, "C2": bad_status}) == 1
    out = capsys.readouterr().out
    assert "| C1 | deliberately wrong | never | check raised RuntimeError: kaput | FAIL |" in out
    assert "| C2 | bad status | never | check returned unknown status 'OK' (measured 0) | FAIL |" in out


def test_optional_does_not_fail(capsys):
    assert rc.main({"C22": not_run}) == 0
    out = capsys.readouterr().out
    assert "| C22 | w | e | optional; needs #5 (experiments) | OPTIONAL |" in out
    assert out.strip().splitlines()[-1] == "closed-form: 0/0 PASS, empirical: 0/0 PASS, optional: 1"


def test_a_row_is_its_result_s_texts_and_pass_rule(capsys):
    """The row's texts come from the result's class and its ``measured``; the pass rule decides
    the status, and a FAIL makes ``main`` return 1; the measurement runs once."""
    calls = []

    def measure() -> Rate:
        calls.append(1)
        return Rate(0.25)

    assert rc.run_claim(measure) == ("rate 0.25", rc.FAIL) and len(calls) == 1
    assert rc.run_claim(lambda: Rate(0.25, need=0.1)) == ("rate 0.25", rc.PASS)
    assert rc.main({"C6": measure}) == 1 and len(calls) == 2
    assert "| C6 | w | e | rate 0.25 | FAIL |" in capsys.readouterr().out


def test_a_measurement_must_name_its_result_class():
    def unannotated():
        return Rate(1.0)

    def annotated_dict() -> dict:
        return {}

    for measure in (unannotated, annotated_dict):
        with pytest.raises(TypeError, match="ClaimResult subclass"):
            rc.result_type(measure)
    assert rc.result_type(not_run) is NotRun


def check_env_rows(done: EntryResult) -> None:
    """C9, C10, C11, C21, C23, C24 run the real envs and scripted agents in the entry point and
    PASS; each row reports what it measured (numbers), never a placeholder."""
    assert done.returncode == 0, done.stdout + done.stderr
    rows = rows_of(done.stdout)
    for cid in ENV_ROWS:
        assert rc.result_type(rc.CLAIMS[cid]).kind == "empirical"
        assert rows[cid][-1] == "PASS", rows[cid]
        assert not rows[cid][3].startswith("needs #") and any(ch.isdigit() for ch in rows[cid][3]), rows[cid]
    assert "step = one tool call (turn)" in rows["C9"][3]
    assert "lossy_summary" in rows["C10"][3] and "structured_summary" in rows["C10"][3]
    for reason in ("submitted_failed", "consecutive_timeouts", "infra_error", "max_turns"):
        assert reason in rows["C11"][3]
    assert "scripted agents" in rows["C24"][3]


def check_trainer_rows(done: EntryResult) -> None:
    """C6, C7, C8, C12, C13, C14, C17, C19, C20 run the rollout engine / trainers / experiments.train
    in the entry point; each row reports what it measured (numbers), never a placeholder."""
    rows = rows_of(done.stdout)
    for cid in TRAINER_ROWS:
        assert rc.result_type(rc.CLAIMS[cid]).kind == "empirical"
        assert rows[cid][-1] == "PASS", rows[cid]
        assert not rows[cid][3].startswith("needs #") and any(ch.isdigit() for ch in rows[cid][3]), rows[cid]
    assert "Wilson CI" in rows["C6"][3] and "P_mix" in rows["C6"][3]
    assert "old log-probs" in rows["C7"][3]
    assert "un-masked" in rows["C8"][3]
    assert "bootstrap used" in rows["C17"][3]
    for axis in ("rollouts", "generated_tokens", "tool_seconds", "train_flops", "wall_seconds"):
        assert axis in rows["C19"][3]
    assert "trainer: GRPO x2" in rows["C24"][3] and "trainer grpo_process" in rows["C24"][3]


def test_only_runs_the_named_rows_and_refuses_an_unknown_id(capsys):
    assert rc.main(argv=["--only", "C16", "C15"]) == 0
    rows = rows_of(capsys.readouterr().out)
    assert list(rows) == ["C15", "C16"] and rows["C15"][-1] == rc.PASS  # table order, the closed-form rows only
    with pytest.raises(SystemExit) as e:
        rc.main(argv=["--only", "C99"])
    assert e.value.code == 2 and "--only C99 unknown; allowed: C1, " in capsys.readouterr().err
