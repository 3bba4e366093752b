"""``MemoryFacts``: what an env tells a context compressor about the episode so far.

Every single-agent env implements ``memory_facts() -> MemoryFacts`` on its ``unwrapped`` env
(docs/interfaces.md); the compression strategies (``envs.compression``) read only these fields
and ``task_statement()``, so they work on every env.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryFacts:
    """The facts a perfect summary of the episode so far keeps; every text encodes with the
    tokenizer.

    ``task``: the task statement; ``tried``: one line per approach / fix tried and what it gave
    (``"approach A -> fails at the input boundary"``), oldest first; ``code_state``: the state of
    the work (the code, or the stages left); ``pending``: what remains to be done;
    ``last_test_status``: the latest test result as the agent saw it."""

    task: str
    tried: tuple[str, ...]
    code_state: str
    pending: str
    last_test_status: str

    def texts(self) -> tuple[str, ...]:
        """Every text of the facts: ``task``, each ``tried`` line, ``code_state``, ``pending``,
        ``last_test_status``."""
        return (self.task, *self.tried, self.code_state, self.pending, self.last_test_status)


__all__ = ["MemoryFacts"]
