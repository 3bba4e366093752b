"""What one training run is made of: the config schema and its validation (``schema``,
``config``), the named random streams (``seeds``), building envs, engines and models (``build``),
the start model and the warm start (``warmstart``, ``bc``), the run directory and its files
(``rundir``), loggers, the behaviour sampler, memory release, and the one training loop
(``loop``) over a learner (``learner``) of one agent (``one_agent``) or two (``pair``). The other rooms of ``experiments`` import from here, never the
other way.
"""
