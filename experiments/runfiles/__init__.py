"""The files a run directory holds, as both sides read them: the names and keys the runtime writes
and the report reads (:mod:`experiments.runfiles.axes`), and the sample-transcript file
(:mod:`experiments.runfiles.transcripts`). A leaf: it imports nothing from the other rooms of
``experiments``, so the runtime and the report can both import it.
"""
