"""The trainer registry: algorithm name -> ``Trainer`` subclass.

A leaf module (it imports nothing from ``algos``), so ``algos.trainer`` (the base class) and the
algorithms (``algos.grpo``, ``algos.ppo``, ``algos.rloo``, ``algos.gigpo``, ``algos.grpo_process``)
can all import it without importing each other.
``@register("name")`` on a class adds it; ``make_trainer(name, ...)`` builds one. The built-in
algorithms live in ``BUILTIN_MODULES`` and are imported on the first lookup, so a caller never has
to import them for their side effect.
"""

from __future__ import annotations

import importlib

# modules whose import registers the built-in trainers
BUILTIN_MODULES = ("algos.grpo", "algos.ppo", "algos.rloo", "algos.gigpo", "algos.grpo_process", "algos.ppo_ctde")

# algorithm name -> Trainer subclass (filled by ``register``)
TRAINERS: dict[str, type] = {}


def register(name: str):
    """Class decorator: ``TRAINERS[name] = cls`` and ``cls.name = name``. A name registered twice
    raises ``ValueError`` (two classes cannot answer to one ``algo.name``)."""

    def deco(cls):
        if name in TRAINERS and TRAINERS[name] is not cls:
            raise ValueError(f"trainer {name!r} is already registered (by {TRAINERS[name].__qualname__}); "
                             f"pick another name")
        cls.name = name
        TRAINERS[name] = cls
        return cls

    return deco


def load_builtin_trainers() -> dict[str, type]:
    """Import ``BUILTIN_MODULES`` (registering their trainers); returns ``TRAINERS``."""
    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    return TRAINERS


def make_trainer(name: str, *args, **kwargs):
    """``TRAINERS[name](*args, **kwargs)``; the usual call is
    ``make_trainer(name, algo, policy, critic=None, reference=None, temperature=1.0, meter=None)``.
    An unknown name raises ``ValueError`` listing the registered ones."""
    load_builtin_trainers()
    if name not in TRAINERS:
        raise ValueError(f"algo {name!r} unknown; allowed: {', '.join(sorted(TRAINERS))}")
    return TRAINERS[name](*args, **kwargs)


__all__ = ["BUILTIN_MODULES", "TRAINERS", "load_builtin_trainers", "make_trainer", "register"]
