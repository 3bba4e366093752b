"""The claims of docs/claims.md, one measurement per claim ID.

Each ``measure_cNN(...)`` sets up what its claim needs with fixed seeds (hand-sized inputs through
``algos``, or the real envs, rollout engine, trainers and training entry point) and returns a
frozen dataclass: the measured values as typed fields and the row's texts (``what``,
``measured``). An empirical claim's result (a :class:`experiments.claims.result.ClaimResult`) also
carries ``expected`` and the claim's pass rule (``passes()``), defined next to the measurement; a
closed-form claim's expected numbers and pass rule are its test, tagged ``@pytest.mark.claim(ID)``
in tests/claims/test_closed_form.py, which ``tagged`` runs as the claim's row.
``experiments/reproduce_claims.py`` holds the registry of claim IDs and prints one row per claim.

Modules by topic: ``closed_form`` (C1-C5, C15, C16, C18, C25), ``groups`` (C6, C12, C13, C14),
``roles`` (C7, C8), ``boundaries`` (C17), ``compare`` (C19, C20), ``envs`` (C9, C10, C11, C21,
C23 and C24's scripted agents), ``multiagent`` (C22), ``process`` (C24: the scripted agents and the
trainer runs); ``tagged`` runs the closed-form claims' tagged tests; ``result`` holds the base
classes, the statuses and the shared number formatting; ``common`` holds the shared setup (the claims config, the start model, engines, scripted episodes)
and the one function that reads a trainer's internals (:func:`experiments.claims.common.run_update`).
"""
