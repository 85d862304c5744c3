"""The top layer: the commands (train, eval, play, bench, the ``unilab`` CLI) and the run directory they write."""
