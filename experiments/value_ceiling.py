"""``python -m experiments.value_ceiling RUN_DIR [options]``: the explained-variance ceiling of a
PPO run's critic, from branched rollouts at its decision points
(:mod:`experiments.probes.value_ceiling`)."""

import sys

from experiments.probes.value_ceiling import main

if __name__ == "__main__":
    sys.exit(main())
