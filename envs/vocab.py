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
    "yes", "no", "true", "false", "task", "summary", "context", "compressed",
]

# Owned by envs/bugfix.py, envs/tools.py, envs/verifier.py.
BUGFIX_WORDS: list[str] = []

# Owned by envs/long_horizon.py.
LONG_HORIZON_WORDS: list[str] = []

# Owned by envs/compression.py (summary headers, placeholders).
COMPRESSION_WORDS: list[str] = []


def all_words() -> list[str]:
    """Every non-special word in vocabulary order (first occurrence wins, integers last)."""
    seen: dict[str, None] = {}
    for word in COMMON_WORDS + BUGFIX_WORDS + LONG_HORIZON_WORDS + COMPRESSION_WORDS:
        seen.setdefault(word, None)
    low, high = INTEGER_RANGE
    for n in range(low, high + 1):
        seen.setdefault(str(n), None)
    return list(seen)
