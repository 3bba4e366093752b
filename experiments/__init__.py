"""Experiments on top of ``envs`` and ``algos``: training runs, comparisons, reports, claims and
probes.

The top-level modules are the commands users run (``python -m experiments.<name>``): ``train``,
``warmstart``, ``critic_probe``, ``value_ceiling``, ``models``, ``hf_tiny``, ``reproduce_claims``,
and the packages ``compare``, ``report``, ``calibrate`` and ``dashboard`` (each with a
``__main__``). Each subpackage answers one question: ``runtime`` (what one training run is made
of), ``runfiles`` (the run directory's file formats, shared by the runtime and the report),
``compare`` (the compare job), ``report`` (reads run directories and renders), ``claims`` (the
claim measurements), ``calibrate`` (the env floor / ceiling and the start model between them),
``dashboard`` (the W&B workspace and report of a sweep). Imports go one way: ``runtime`` <- the
other rooms <- the entry points (tests/test_layers.py checks it). The speed benchmarks are not
here: ``benchmarks/`` of a checkout (``python -m benchmarks``) sits above this package and
nothing here imports it.
"""
