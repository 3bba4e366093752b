"""``python -m experiments.calibrate``: the env floor / ceiling calibration with scripted agents
(:mod:`~experiments.calibrate.scripted`) and the start model between them
(:mod:`~experiments.calibrate.band`, the command line).
"""
