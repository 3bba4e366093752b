"""Measurements beside training: the env floor / ceiling calibration with scripted agents
(:mod:`~experiments.probes.calibrate`) and the start model between them
(:mod:`~experiments.probes.band`), the critic fit of a start model
(:mod:`~experiments.probes.critic_probe`) and the explained-variance ceiling of a run's critic
(:mod:`~experiments.probes.value_ceiling`). Their command lines are the top-level modules
``experiments.calibrate``, ``experiments.critic_probe`` and ``experiments.value_ceiling``.
"""
