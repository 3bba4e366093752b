"""Benchmarks (``python -m experiments.bench envs | train | e2e``): env steps/s against
FrozenLake-v1 (:mod:`~experiments.bench.envs`), training throughput against raw-torch bounds
(:mod:`~experiments.bench.train`), end-to-end tokens/s of this tree against a baseline tree
(:mod:`~experiments.bench.e2e`). The command line is :mod:`experiments.bench.cli`.
"""
