"""The BugFix action grammar: verbs, usage lines, and the one parser every action goes through.

Whitespace rule (one for every separator): words are separated by ASCII spaces (runs of spaces
count as one; leading / trailing spaces are ignored). Any other character outside ``ACTION_CHARSET``
- a line break, a tab, a no-break space, a Unicode line or record separator - and any action longer
than ``MAX_ACTION_CHARS`` (the action space's ``max_length``) is a format error.
"""

from __future__ import annotations

from functools import lru_cache

from envs.bugfix.language import INT_WORDS, PROGRAM_WORDS, compile_line

FILES = ("main", "tests", "ref", "log")
PROTECTED_FILES = ("ref", "log")
USAGE = {
    "ls": "ls",
    "view": "view FILE",
    "edit": "edit LINE OLD NEW",
    "replace": "replace LINE STATEMENT",
    "insert": "insert LINE STATEMENT",
    "delete": "delete LINE",
    "undo": "undo",
    "run_tests": "run_tests",
    "submit": "submit",
    "give_up": "give_up",
    "skip_tests": "skip_tests",
    "edit_test": "edit_test N OUT",
    "delete_test": "delete_test N",
}
ACTION_VERBS = tuple(USAGE)
NO_ARGUMENT_VERBS = ("ls", "undo", "run_tests", "submit", "give_up", "skip_tests")
UNKNOWN_TEXT = "error: unknown action"
TOO_LONG_TEXT = "error: malformed action . too long"
# Every character an observation can contain; actions may use all of them but the line break.
CHARSET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n_-+*<>=!:,.()[]|#"
ACTION_CHARSET = frozenset(CHARSET) - {"\n"}
MAX_ACTION_CHARS = 256
MAX_OBSERVATION_CHARS = 4096


def _positive(word: str) -> int | None:
    if word in INT_WORDS:
        n = int(word)
        return n if n >= 1 else None
    return None


def action_words(action: str) -> list[str] | None:
    """The words of ``action`` under the whitespace rule; None when the action breaks it."""
    if len(action) > MAX_ACTION_CHARS or not ACTION_CHARSET.issuperset(action):
        return None
    return [w for w in action.split(" ") if w]


@lru_cache(maxsize=1 << 13)
def parse_action(action: str) -> tuple[str, tuple, str | None]:
    """``(verb, args, None)`` for a well-formed action, else ``("", (), error_text)``."""
    if len(action) > MAX_ACTION_CHARS:
        return "", (), TOO_LONG_TEXT
    words = action_words(action)
    if not words or words[0] not in USAGE:
        return "", (), UNKNOWN_TEXT
    verb, rest = words[0], words[1:]
    args: tuple | None = None
    if verb in NO_ARGUMENT_VERBS:
        args = () if not rest else None
    elif verb == "view":
        args = (rest[0],) if len(rest) == 1 and rest[0] in FILES else None
    elif verb == "edit":
        if len(rest) == 3 and rest[1] in PROGRAM_WORDS and rest[2] in PROGRAM_WORDS:
            n = _positive(rest[0])
            args = None if n is None else (n, rest[1], rest[2])
    elif verb in ("replace", "insert"):
        if len(rest) >= 2:
            n = _positive(rest[0])
            stmt = " ".join(rest[1:])
            if n is not None and compile_line(stmt) is not None:
                args = (n, stmt)
    elif verb in ("delete", "delete_test"):
        n = _positive(rest[0]) if len(rest) == 1 else None
        args = None if n is None else (n,)
    elif verb == "edit_test":
        if len(rest) == 2 and rest[1] in INT_WORDS:
            n = _positive(rest[0])
            args = None if n is None else (n, int(rest[1]))
    if args is None:
        return "", (), f"error: malformed action . usage: {USAGE[verb]}"
    return verb, args, None
