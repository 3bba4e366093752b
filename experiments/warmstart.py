"""Build (or find) the cached behaviour-cloning warm start of a config and print its info.

    python -m experiments.warmstart env=bugfix warmstart.noise=0.5 warmstart.demos=256

The warm start itself (demonstrations, behaviour cloning, the start success, the cache) is
:mod:`experiments.runtime.warmstart`.
"""

from __future__ import annotations

import json
import sys

import hydra
from omegaconf import DictConfig

from experiments.runtime.config import register_configs, validate
from experiments.runtime.schema import ConfigError
from experiments.runtime.warmstart import ensure_warmstart


def main() -> None:
    register_configs()

    @hydra.main(version_base="1.3", config_path="../configs", config_name="config")
    def _run(cfg: DictConfig) -> None:
        try:
            c = validate(cfg)
        except ConfigError as e:
            print(f"config error: {e}", file=sys.stderr)
            sys.exit(2)
        info = ensure_warmstart(c)
        print(json.dumps({"path": info.path, "start_success": info.start_success, "demo_success": info.demo_success,
                          "demos": info.demos}, indent=2))

    _run()


if __name__ == "__main__":
    main()
