"""Regenerate the shipped G1 reference clip: ``python scripts/make_reference_clip.py [--out PATH]``.

The procedure lives in ``unilab.robots.g1.reference`` so that tests can rerun it; this script only
chooses where the file goes and reports what it wrote.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from unilab.motion import DEFAULT_MOTION
from unilab.motion.files import save_clip
from unilab.robots import g1
from unilab.robots.g1.reference import DURATION_S, FPS, generate_reference_clip


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description="Regenerate the shipped G1 reference clip.")
    parser.add_argument("--out", type=Path, default=DEFAULT_MOTION, help="where to write the .npz clip")
    args = parser.parse_args(argv)
    clip = generate_reference_clip(g1.load_model(), fps=FPS, duration=DURATION_S)
    path = save_clip(args.out, clip)
    frames = clip["joint_pos"].shape[0]
    print(f"wrote {path} ({frames} frames at {FPS:g} Hz, {path.stat().st_size / 1024:.0f} KiB)")
    return path


if __name__ == "__main__":
    main()
