"""Developer benchmarks, outside the installed package; run from a checkout's root
(``python -m benchmarks envs | train | e2e | hf | gpu | async``): env steps/s against
FrozenLake-v1 (:mod:`~benchmarks.envs`), training throughput against raw-torch bounds
(:mod:`~benchmarks.train`), end-to-end tokens/s of this tree against a baseline tree
(:mod:`~benchmarks.e2e`). The command line is :mod:`benchmarks.cli`.
"""
