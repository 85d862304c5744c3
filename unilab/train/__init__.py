"""The training loops (off-policy, on-policy) and the algorithms they run, each a package of its settings and its
learner. Importing a settings module loads no torch: ``unilab list`` and ``train --help`` read them."""
