"""``python -m experiments.bench envs | train | e2e``: the benchmarks' command line (:mod:`experiments.bench.cli`)."""

import sys

from experiments.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
