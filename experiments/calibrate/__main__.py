"""``python -m experiments.calibrate``: the calibration's command line (:func:`experiments.calibrate.band.main`)."""

import sys

from experiments.calibrate.band import main

if __name__ == "__main__":
    sys.exit(main())
