"""The claims of docs/claims.md, one measurement per claim ID.

Each ``measure_cNN(...)`` sets up what its claim needs with fixed seeds (hand-sized inputs through
``algos``, or the real envs, rollout engine, trainers and training entry point) and returns a
frozen dataclass, a subclass of :class:`experiments.claims.result.ClaimResult`: the measured
values as typed fields, the row's texts (``what``, ``expected``, ``measured``) and the claim's pass
rule (``passes()``), defined next to the measurement. ``experiments/reproduce_claims.py`` holds
the registry of claim IDs and prints one row per result.

Modules by topic: ``closed_form`` (C1-C5, C15, C16, C18, C25), ``groups`` (C6, C12, C13, C14),
``roles`` (C7, C8), ``boundaries`` (C17), ``compare`` (C19, C20), ``envs`` (C9, C10, C11, C21,
C23 and C24's scripted agents), ``multiagent`` (C22), ``process`` (C24: the scripted agents and the
trainer runs); ``result`` holds the base class, the statuses and the shared number formatting;
``common`` holds the shared setup (the claims config, the start model, engines, scripted episodes)
and the one function that reads a trainer's internals (:func:`experiments.claims.common.run_update`).
"""
