"""``python -m experiments.compare``: the compare job's command line (:func:`experiments.compare.job.main`)."""

import sys

from experiments.compare.job import main

if __name__ == "__main__":
    sys.exit(main())
