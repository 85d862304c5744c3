"""A training run's plumbing, beneath the commands: the run itself (``training_run``), its config schema, the checks
before any work, the run directory and its claim, checkpoints, signals, the watchdog, the start-up clock, loggers and
the tail-rate meter. Nothing here imports a command."""
