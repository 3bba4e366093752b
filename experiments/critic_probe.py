"""``python -m experiments.critic_probe [options] [-- overrides]``: how well a critic fits Monte
Carlo returns at the decision points of the start model's rollouts
(:mod:`experiments.probes.critic_probe`)."""

import sys

from experiments.probes.critic_probe import main

if __name__ == "__main__":
    sys.exit(main())
