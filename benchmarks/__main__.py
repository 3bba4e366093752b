"""``python -m benchmarks envs | train | e2e | hf | gpu | async``: the benchmarks' command line (:mod:`benchmarks.cli`)."""

import sys

from benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main())
