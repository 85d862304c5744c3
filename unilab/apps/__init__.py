"""The top layer: the commands (train, eval, play, view, bench, cache, the ``unilab`` CLI) and what only they share
(argument parsing, the early answers, config composition, policies, rollouts); a run's plumbing is ``unilab.run``."""
