"""Measurements behind the empirical rows of ``experiments/reproduce_claims.py``.

Each ``measure_cNN(...) -> dict`` sets up the project's real rollout engine, trainers or training
entry point with fixed seeds and returns the numbers it measured (floats, ints, bools, lists of
them, and a few labels); it never decides PASS / FAIL. The criterion of every row and the text of
its "measured" column live in ``experiments/claims/criteria.py``, the table in
``experiments/reproduce_claims.py``.

Modules by topic: ``groups`` (C6, C12, C13, C14), ``roles`` (C7, C8), ``boundaries`` (C17),
``compare`` (C19, C20), ``process`` (C24, trainer part), ``envs`` (C9, C10, C11, C21, C23,
C24 scripted agents), ``criteria`` (every row's criterion and text); ``common`` holds the shared setup (the
claims config, the start model, engines, scripted episodes) and the one function that reads a
trainer's internals (:func:`experiments.claims.common.run_update`).
"""
