"""The one fixed vocabulary every env and the policy share.

Each list below is owned by one module (its comment says which). A word may appear in more than
one list; the tokenizer keeps the first occurrence. Text is tokenized by whitespace, so every word
an env can print and every word an action can contain must be listed here (numbers are covered by
``INTEGER_RANGE``). ``tests/envs/test_tokenizer.py`` checks that real episodes encode without error.
"""

# Reserved ids, in this order, at the start of the vocabulary.
PAD, BOS, EOS, SEP, NEWLINE = "<pad>", "<bos>", "<eos>", "<sep>", "<nl>"
SPECIAL_TOKENS = [PAD, BOS, EOS, SEP, NEWLINE]

# Every integer in this closed range is one token ("-3", "0", "17"). Envs clamp what they print.
INTEGER_RANGE = (-99, 199)

# Words shared by all envs: error messages, punctuation used as words, stop-reason names.
COMMON_WORDS = [
    "error:", "unknown", "action", "malformed", "usage:", "ok", "done", "episode", "ended",
    "turn", "turns", "left", ":", ",", ".", "(", ")", "=", "->", "[", "]", "|", "#",
    "yes", "no", "true", "false", "task", "summary", "context", "compressed", "whitespace",
]

# Owned by envs/bugfix/ (its language, actions, tool outputs and graders) and envs/tools.py.
BUGFIX_WORDS: list[str] = [
    # program language
    "x", "t", "u", "v", "+", "-", "*", "<", ">", "<=", ">=", "==", "!=", "if", "then", "return",
    # actions, files, usage placeholders
    "ls", "view", "edit", "replace", "insert", "delete", "undo", "run_tests", "submit", "give_up",
    "skip_tests", "edit_test", "delete_test", "main", "tests", "ref", "log",
    "FILE", "LINE", "OLD", "NEW", "STATEMENT", "N", "OUT",
    # tool outputs and errors
    "fix", "so", "that", "all", "pass", "files", "protected", "empty", "skipped", "history", "was",
    "deleted", "line", "test", "passed", "failed", "fail", "expected", "got", "hint", "none",
    "permission", "denied", "is", "not", "in", "syntax", "error", "nothing", "to", "too", "long",
    "timed", "out", "cancelled", "infrastructure", "crash", "clipped", "submitted", "gave", "up",
    "failing", "undone", "tool",
    # stop reasons (printed when the env ends an episode)
    "submitted_resolved", "submitted_failed", "submitted_voided", "turn_limit", "forfeit", "format_errors", "consecutive_timeouts",
    "max_turns", "token_budget", "wall_clock", "infra_error",
]

# Owned by envs/long_horizon.py and envs/long_horizon_v3.py.
LONG_HORIZON_WORDS: list[str] = [
    # actions and the task statement
    "read", "notes", "status", "inspect", "step", "try", "submit", "forfeit", "N", "X",
    "A", "B", "C", "D", "E", "F", "G", "H",
    "fix", "the", "system", "finish", "every", "stage", "stages", "then", "key", "from",
    "approaches", "approach", "one", "works", "others", "fail", "before", "first", "they",
    "are", "archived", "after", "it", "actions",
    # tool outputs and memory facts
    "is", "left", "none", "tests", "passing", "failing", "not", "run", "find", "that", "log",
    "page", "already", "applied", "submitted", "resolved", "failed", "many",
    # failure reasons
    "fails", "at", "input", "boundary", "on", "empty", "under", "concurrent", "load",
    "negative", "numbers", "when", "cache", "cold", "a", "restart", "large", "with",
    "unicode", "names",
    # format-error messages
    "takes", "argument", "to", "of", "number", "too", "format", "errors",
    # verbose filler
    "info", "debug", "trace", "worker", "thread", "queue", "hit", "miss", "request",
    "handled", "in", "ms", "retry", "latency", "bytes", "write", "flush", "sync",
    "heartbeat", "shard", "node", "lock", "acquired", "released", "batch", "commit", "gc",
    "pause", "socket", "open", "closed",
]

# Owned by envs/compression.py (summary headers, placeholders).
COMPRESSION_WORDS: list[str] = [
    "compact",  # the agent's explicit compression request (intercepted by the wrapper)
    "recent", "earlier", "omitted", "old", "outputs", "hidden", "output", "latest", "status",
    "tried", "none", "code", "state", "pending", "many",
]


# Owned by envs/pairfix/ (agent names, the send tool, message words). Listed AFTER the integers
# in ``all_words`` so adding them kept every earlier id.
PAIRFIX_WORDS: list[str] = [
    "agent", "b", "send", "sent", "message", "file", "by", "wait", "bug", "mine", "yours", "both",
    "fixed", "ask", "you", "me", "help", "WORDS",
]


def all_words() -> list[str]:
    """Every non-special word in vocabulary order (first occurrence wins; integers, then the
    PairFix words, last)."""
    seen: dict[str, None] = {}
    for word in COMMON_WORDS + BUGFIX_WORDS + LONG_HORIZON_WORDS + COMPRESSION_WORDS:
        seen.setdefault(word, None)
    low, high = INTEGER_RANGE
    for n in range(low, high + 1):
        seen.setdefault(str(n), None)
    for word in PAIRFIX_WORDS:
        seen.setdefault(word, None)
    return list(seen)
