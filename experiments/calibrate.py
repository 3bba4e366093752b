"""``python -m experiments.calibrate [--episodes N] [--difficulties ...] [--mistake-rates ...]
[--horizons H ...] [--start-model [-- OVERRIDES]]``: the floor / ceiling table of BugFix-v2 and
LongHorizon with scripted agents, and the start model of each LongHorizon-v3 horizon
(:mod:`experiments.probes.band`)."""

import sys

from experiments.probes.band import main

if __name__ == "__main__":
    sys.exit(main())
