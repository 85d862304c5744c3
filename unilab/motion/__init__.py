"""Reference motions for whole-body imitation: loading clips (one file or a library) onto the device, and the
shipped clip."""

from pathlib import Path

from unilab.assets import ASSETS_DIR
from unilab.motion.files import MotionFileError, MotionSpec, motion_files
from unilab.motion.loader import CONTROL_FPS, MotionClips, load_motions

DEFAULT_MOTION: Path = ASSETS_DIR / "motions" / "g1_reference_sway.npz"
"""The clip shipped with the package (see ``unilab/assets/motions/PROVENANCE.md``)."""

__all__ = [
    "CONTROL_FPS",
    "DEFAULT_MOTION",
    "MotionClips",
    "MotionFileError",
    "MotionSpec",
    "load_motions",
    "motion_files",
]
