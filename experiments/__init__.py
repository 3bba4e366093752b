"""Experiments on top of ``envs`` and ``algos``: training runs, comparisons, reports, claims,
benchmarks and probes.

The top-level modules are the commands users run (``python -m experiments.<name>``): ``train``,
``warmstart``, ``calibrate``, ``critic_probe``, ``value_ceiling``, ``models``, ``hf_tiny``,
``reproduce_claims``, and the packages ``compare``, ``report``, ``bench`` and ``dashboard`` (each
with a ``__main__``). Each subpackage answers one question: ``runtime`` (what one training run
is made of), ``runfiles`` (the run directory's file formats, shared by the runtime and the
report), ``compare`` (the compare job), ``report`` (reads run directories and renders),
``claims`` (the claim measurements), ``bench`` (benchmarks), ``probes`` (measurements beside
training), ``dashboard`` (the W&B workspace and report of a sweep). Imports go one way:
``runtime`` <- the other rooms <- the entry points (tests/test_layers.py checks it).
"""
