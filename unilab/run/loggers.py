"""Where a run's scalars go: TensorBoard by default, CSV files or Weights & Biases on request (``training.logger``),
through TorchRL's loggers, every one writing into the run directory."""

from __future__ import annotations

import importlib.util
from pathlib import Path

LOGGERS = ("tensorboard", "csv", "wandb")


def check_logger(kind: str) -> None:
    """Refuse, before any work, a logger that is unknown or whose package is missing."""
    if kind not in LOGGERS:
        raise ValueError(f"training.logger={kind!r}: choose one of {', '.join(LOGGERS)}")
    if kind == "wandb" and importlib.util.find_spec("wandb") is None:
        raise ValueError("training.logger=wandb needs the wandb package: pip install wandb")


class RunLogger:
    """One of TorchRL's loggers, opened on the run directory: scalars go to ``<run>/events.out.tfevents.*``
    (TensorBoard), ``<run>/scalars/<name>.csv`` (CSV) or a W&B run saved under ``<run>``."""

    def __init__(self, kind: str, run_dir: Path) -> None:
        check_logger(kind)
        from torchrl.record.loggers import CSVLogger, TensorboardLogger

        if kind == "tensorboard":
            self._logger = TensorboardLogger(exp_name="", log_dir=str(run_dir))
        elif kind == "csv":
            self._logger = CSVLogger(exp_name="", log_dir=str(run_dir))
        else:
            from torchrl.record.loggers import WandbLogger

            self._logger = WandbLogger(exp_name=run_dir.name, save_dir=str(run_dir), project="unilab")
        self.kind = kind

    def log_scalars(self, scalars: dict[str, float], step: int) -> None:
        for name, value in scalars.items():
            self._logger.log_scalar(name, value, step=step)

    def close(self) -> None:
        """Flush and release what the logger holds open."""
        experiment = self._logger.experiment
        if self.kind == "tensorboard":
            experiment.close()
        elif self.kind == "csv":
            for handle in experiment.files.values():
                handle.close()
        else:
            experiment.finish()
