"""The compare job (``python -m experiments.compare``): a compute-matched sweep of RL methods over
seeds, its report and a W&B summary run; the job itself is :mod:`experiments.compare.job`, the
sweep subprocess's supervision :mod:`experiments.compare.supervise`.

The names below are the package's interface to the test of the README's commands
(tests/test_readme_commands.py): the override that adds the tiny preset (configs/experiment/tiny.yaml)
to a compare preset, with which a README command is smoke-tested, and the filter of Hydra's schema notice.
"""

from experiments.compare.job import TINY_PRESET
from experiments.compare.supervise import NoticeFilter

__all__ = ["TINY_PRESET", "NoticeFilter"]
