"""Text <-> token ids over the fixed vocabulary of ``envs/vocab.py``.

Contract: ``encode`` splits on spaces, maps each line break to ``<nl>``, and raises ``ValueError``
naming the first word that is not in the vocabulary (nothing is silently replaced). ``decode``
inverts ``encode`` up to whitespace normalisation (runs of spaces become one space) and drops
special tokens other than ``<nl>``. Ids are stable for a given vocabulary.
"""

from __future__ import annotations

from functools import lru_cache

from envs import vocab


class Tokenizer:
    """Word-level tokenizer. ``pad_id=0, bos_id=1, eos_id=2, sep_id=3, newline_id=4``."""

    def __init__(self) -> None:
        self.id_to_token: list[str] = list(vocab.SPECIAL_TOKENS) + vocab.all_words()
        self.token_to_id: dict[str, int] = {t: i for i, t in enumerate(self.id_to_token)}
        self.pad_id = self.token_to_id[vocab.PAD]
        self.bos_id = self.token_to_id[vocab.BOS]
        self.eos_id = self.token_to_id[vocab.EOS]
        self.sep_id = self.token_to_id[vocab.SEP]
        self.newline_id = self.token_to_id[vocab.NEWLINE]

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    def words(self, text: str) -> list[str]:
        """The word sequence of ``text``: whitespace-split, with ``<nl>`` for each line break."""
        out: list[str] = []
        for i, line in enumerate(text.split("\n")):
            if i > 0:
                out.append(vocab.NEWLINE)
            out.extend(line.split())
        return out

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``; ``ValueError`` on a word outside the vocabulary."""
        ids = []
        for word in self.words(text):
            try:
                ids.append(self.token_to_id[word])
            except KeyError:
                raise ValueError(
                    f"word {word!r} is not in the vocabulary (see envs/vocab.py; integers "
                    f"{vocab.INTEGER_RANGE[0]}..{vocab.INTEGER_RANGE[1]} are allowed)"
                ) from None
        return ids

    def can_encode(self, text: str) -> bool:
        """True when every word of ``text`` is in the vocabulary."""
        return all(w in self.token_to_id for w in self.words(text))

    def decode(self, ids) -> str:
        """Text of ``ids``: words joined by spaces, ``<nl>`` as a line break, other specials dropped."""
        parts: list[str] = []
        for i in ids:
            token = self.id_to_token[int(i)]
            if token == vocab.NEWLINE:
                parts.append("\n")
            elif token in vocab.SPECIAL_TOKENS:
                continue
            else:
                if parts and parts[-1] != "\n":
                    parts.append(" ")
                parts.append(token)
        return "".join(parts)

    def count(self, text: str) -> int:
        """Number of tokens ``text`` encodes to (words plus line breaks)."""
        return len(self.words(text))


@lru_cache(maxsize=1)
def get_tokenizer() -> Tokenizer:
    """The shared tokenizer (built once per process)."""
    return Tokenizer()
