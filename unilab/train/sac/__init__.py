"""SAC (FastSAC): its settings (``config``, light) and its learner (``learner``, the training stack)."""
