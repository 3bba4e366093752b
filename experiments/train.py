"""One training run: ``python -m experiments.train algo=grpo env=bugfix budget.amount=512``.

Composes ``configs/config.yaml`` with the command line's overrides (Hydra; ``-m`` for a sweep),
validates it before any compute (a one-line ``config error: ...`` and exit code 2 on a bad
config, or on a config whose estimated peak memory does not fit the machine:
:mod:`experiments.runtime.peak_memory`) and runs it with :func:`experiments.runtime.loop.run` (build, the update loop, the
summary; resume from the run directory's checkpoint when there is one). A two-agent env
(``env=pairfix`` with ``algo=ppo_ctde | ppo_independent``) runs through the same loop with the
two-agent learner (``experiments.runtime.pair.TwoAgentLearner``).
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from experiments.runtime.config import register_configs, validate
from experiments.runtime.loop import run
from experiments.runtime.peak_memory import check_fits
from experiments.runtime.schema import ConfigError


def main() -> None:
    register_configs()

    @hydra.main(version_base="1.3", config_path="../configs", config_name="config")
    def _main(cfg: DictConfig):
        try:
            c = validate(cfg)  # before any compute
            check_fits(c)  # the estimated peak memory against the machine's
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            sys.exit(2)
        return run(c, resolved=OmegaConf.to_container(cfg, resolve=True))

    _main()


if __name__ == "__main__":
    main()
