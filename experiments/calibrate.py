"""``python -m experiments.calibrate [--episodes N] [--difficulties ...] [--mistake-rates ...]``:
the floor / ceiling table of BugFix-v2 and LongHorizon-v1 with scripted agents
(:mod:`experiments.probes.calibrate`)."""

import sys

from experiments.probes.calibrate import main

if __name__ == "__main__":
    sys.exit(main())
