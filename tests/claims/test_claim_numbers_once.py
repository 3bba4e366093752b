"""Each closed-form claim's expected numbers are written once in the repository: in its tagged test
in tests/claims/test_closed_form.py, nowhere else.

A claim's expected literals are the ``expected`` arguments of the ``claim.expect`` calls in its
tagged test that are written as literals: a list or tuple of two or more numbers, or one number
with three or more significant digits (``2.718``). Shorter single numbers (``0.5``, ``2.0``) say
too little to be one claim's and are not looked for. A literal "occurs" where its numbers stand in
that order separated by commas, as a whole run of comma-separated numbers (``0.6, 0.2`` does not
occur in ``0.6, 0.2, 0.9``), in any spelling of each number (``0.6``, ``.6``, ``0.60``; ``2``,
``2.0``), in any text file of the repository (git's tracked and untracked, not ignored, files),
docs/claims.md's generated table excepted (that table is the entry point's output, checked by
tests/claims/test_claims_docs.py).
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from experiments import reproduce_claims as rc
from experiments.claims.tagged import MARK, TESTS

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".ini", ".jinja", ".json")


def _claim_id(fn: ast.FunctionDef) -> str | None:
    for dec in fn.decorator_list:
        if (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr == MARK
                and dec.args and isinstance(dec.args[0], ast.Constant)):
            return dec.args[0].value
    return None


def _numbers(node: ast.expr) -> tuple[float, ...] | None:
    """The numbers of a literal ``expected`` argument (a number, or a list / tuple of numbers),
    else None (an expression: a measured value, ``3.2 / 3``, ``math.sqrt``)."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if items and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
        return tuple(float(v) for v in items)
    return None


def expected_literals(source: str) -> dict[str, list[tuple[float, ...]]]:
    """Claim ID -> the literal expected numbers of its tagged test's ``claim.expect`` calls."""
    out: dict[str, list[tuple[float, ...]]] = {}
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef) or (cid := _claim_id(fn)) is None:
            continue
        for call in ast.walk(fn):
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "expect"
                    and len(call.args) >= 3 and (numbers := _numbers(call.args[2])) is not None):
                out.setdefault(cid, []).append(numbers)
    return out


def fingerprint(numbers: tuple[float, ...]) -> bool:
    """Whether ``numbers`` is looked for: two or more numbers, or one with >= 3 significant digits."""
    return len(numbers) >= 2 or len(f"{abs(numbers[0]):.12g}".replace(".", "").strip("0")) >= 3


def _number_pattern(x: float) -> str:
    """A regex for ``x`` in any plain decimal spelling: optional leading zero, trailing zeros, and
    for an integer an optional ``.0``; not part of a longer number (nor, for ``x >= 0``, negated)."""
    whole, _, frac = f"{abs(x):.12g}".partition(".")
    if frac:
        body = ("0?" if whole == "0" else re.escape(whole)) + rf"\.{frac}0*"
    else:
        body = re.escape(whole) + r"(?:\.0*)?"
    before = r"(?<![\d.])-" if x < 0 else r"(?<![\d.\-])"
    return rf"{before}{body}(?![\d.]*\d)"


def literal_pattern(numbers: tuple[float, ...]) -> re.Pattern:
    """``numbers`` in that order, separated by commas (and spaces)."""
    return re.compile(r"\s*,\s*".join(_number_pattern(x) for x in numbers))


_MORE_BEFORE = re.compile(r"[\d.]\s*,\s*$")
_MORE_AFTER = re.compile(r"^\s*,\s*-?\.?\d")


def count(pattern: re.Pattern, text: str) -> int:
    """Matches of ``pattern`` in ``text`` that are a whole run of comma-separated numbers (no
    number right before or after, across a comma)."""
    return sum(1 for m in pattern.finditer(text)
               if not _MORE_BEFORE.search(text[max(0, m.start() - 40):m.start()])
               and not _MORE_AFTER.search(text[m.end():m.end() + 40]))


def tree_files(root: Path) -> list[Path]:
    """The repository's text files: tracked and untracked-not-ignored, by suffix."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True,
                            text=True, check=True).stdout.split()
    return [root / f for f in listed if f.endswith(TEXT_SUFFIXES) and (root / f).is_file()]


def _text(path: Path, root: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path == root / "docs" / "claims.md" and rc.DOCS_BEGIN in text and rc.DOCS_END in text:
        return rc.with_docs_table(text, "")  # the generated table is output, not a second home
    return text


def occurrences(literals: dict[str, list[tuple[float, ...]]], files: Iterable[Path],
                root: Path) -> dict[tuple[str, tuple[float, ...]], dict[str, int]]:
    """(claim ID, literal) -> {file relative to ``root``: number of occurrences} for every
    fingerprint literal of every claim."""
    texts = {str(f.relative_to(root)): _text(f, root) for f in files}
    out = {}
    for cid, values in literals.items():
        for numbers in filter(fingerprint, values):
            pattern = literal_pattern(numbers)
            out[(cid, numbers)] = {name: n for name, text in texts.items() if (n := count(pattern, text))}
    return out


def not_once(found: dict[tuple[str, tuple[float, ...]], dict[str, int]], home: str) -> list[str]:
    """One line per literal that does not occur exactly once, in ``home``."""
    return [f"{cid} {list(numbers)}: {where}" for (cid, numbers), where in found.items() if where != {home: 1}]


def test_every_closed_form_claim_has_its_expected_numbers_once_in_the_tree():
    literals = expected_literals(TESTS.read_text())
    assert sorted(literals) == sorted(cid for cid, m in rc.CLAIMS.items() if m is rc.TAGGED and cid != "C3")
    found = occurrences(literals, tree_files(ROOT), ROOT)
    assert found and all(cid in {c for c, _ in found} for cid in ("C1", "C5", "C15", "C16", "C25"))
    assert not_once(found, str(TESTS.relative_to(ROOT))) == []


def test_the_checker_finds_a_planted_second_home(tmp_path):
    # a made-up claim C99 with made-up numbers (none of them a real claim's)
    test_file = tmp_path / "test_claims.py"
    test_file.write_text('@pytest.mark.claim("C99")\ndef test_c99(claim):\n'
                         '    claim.expect("first:", m.first, [-0.7, 0.4, 0.9])\n'
                         '    claim.expect("second", m.second, 3.217)\n'
                         '    claim.expect("pair", m.pair, (0, -0.35))\n'
                         '    claim.expect("short", m.short, 0.5)\n'
                         '    claim.expect("measured", m.x, m.y)\n')
    literals = expected_literals(test_file.read_text())
    assert literals == {"C99": [(-0.7, 0.4, 0.9), (3.217,), (0.0, -0.35), (0.5,)]}  # m.y is no literal
    (tmp_path / "notes.md").write_text("it gives -.7, .40, 0.9 here, 0.5 there; 3.2170 too, and [0.0, -0.350]\n")
    # not occurrences: another last number, another sign, a longer number, a longer run, no 0 before
    (tmp_path / "other.py").write_text("x = [-0.7, 0.4, 0.95]; y = [0.7, 0.4, 0.9]; z = 13.217\n"
                                       "w = (-0.7, 0.4, 0.9, 1); v = [7, -0.35]; u = f(, -0.35)\n")
    files = [test_file, tmp_path / "notes.md", tmp_path / "other.py"]
    found = occurrences(literals, files, tmp_path)
    twice = {"test_claims.py": 1, "notes.md": 1}
    # 0.5 alone is too short to look for
    assert found == {("C99", (-0.7, 0.4, 0.9)): twice, ("C99", (3.217,)): twice, ("C99", (0.0, -0.35)): twice}
    assert not_once(found, "test_claims.py") == [f"C99 {list(n)}: {twice}" for n in [(-0.7, 0.4, 0.9), (3.217,),
                                                                                        (0.0, -0.35)]]
    (tmp_path / "notes.md").write_text("nothing here\n")
    assert not_once(occurrences(literals, files, tmp_path), "test_claims.py") == []
