"""Tasks: one package per task (``TASK``, a ``Task``), and the registry that finds them."""
