"""Measurements behind the empirical claims: ``measure_cNN(...) -> dict`` of numbers."""
