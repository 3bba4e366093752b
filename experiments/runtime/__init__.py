"""What one training run is made of: the config schema and its validation (``schema``,
``config``), the named random streams (``seeds``), building envs, engines and models (``build``),
the start model and the warm start (``warmstart``, ``bc``), the run directory and its files
(``rundir``), loggers, the behaviour sampler, memory release, and the training loops of one agent
(``loop``) and of two (``pair``). The other rooms of ``experiments`` import from here, never the
other way.
"""
