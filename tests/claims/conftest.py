"""The ``claim`` fixture of the closed-form claims' tagged tests (experiments/claims/tagged.py)."""

from experiments.claims.tagged import claim  # noqa: F401
