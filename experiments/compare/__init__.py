"""The compare job (``python -m experiments.compare``): a compute-matched sweep of RL methods over
seeds, its report and a W&B summary run; the job itself is :mod:`experiments.compare.job`, the
sweep subprocess's supervision :mod:`experiments.compare.supervise`.

The names below are the package's interface to the test of the README's commands
(tests/test_readme_commands.py): the tiny overrides a README command is smoke-tested with and
the filter of Hydra's schema notice.
"""

from experiments.compare.job import TINY_OVERRIDES, TINY_OVERRIDES_BY_ENV
from experiments.compare.supervise import NoticeFilter

__all__ = ["TINY_OVERRIDES", "TINY_OVERRIDES_BY_ENV", "NoticeFilter"]
