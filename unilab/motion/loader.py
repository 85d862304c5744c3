"""Reference motions for whole-body imitation, read from ``.npz`` files into device tensors.

Two layouts are accepted because clips come from two kinds of tools:

* **per-body** (format A): ``joint_pos``/``joint_vel`` hold the robot's actuated joints only;
  body arrays are indexed by MuJoCo body id unless ``joint_names``/``body_names`` say otherwise.
* **full state** (format B, holosoma-style retargeters): ``joint_pos``/``joint_vel`` are the whole
  ``qpos``/``qvel`` (free root first), and the names say which column is which joint and which
  row of the body arrays is which body; files may carry bodies the robot lacks.

The two are told apart by width: ``joint_pos`` with 7 more columns than joints holds a free root.
The root columns of format B are validated but not used: the pelvis pose in the body arrays is
the same quantity, and reading every body from one place keeps both formats on one path.

Several files form a motion library: their clips are concatenated along time, each at its own offset, so that a
reference lookup stays one gather at a fixed shape. Size checks apply to each clip and to the library as a whole,
from the array headers alone, before any clip is decompressed.

Every clip is brought to the control rate (50 Hz) so that a policy indexes frames by step.
Positions and velocities are interpolated linearly; orientations by sign-aligned nlerp, which for
the small rotation between two neighbouring frames is indistinguishable from slerp. Linear
interpolation never overshoots, which matters more for a tracking target than smoothness.

numpy is used only while reading; everything returned is a float32 torch tensor on ``device``.
"""

from __future__ import annotations

import math
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path

import mujoco
import numpy as np
import torch

from unilab.core.math import quat_nlerp, quat_normalize
from unilab.motion.files import MotionFileError, MotionSpec, motion_files

CONTROL_FPS = 50
"""Frame rate of every loaded clip: one frame per policy step."""

QUAT_NORM_TOLERANCE = 1e-2
"""Largest accepted | |q| - 1 |: loose enough for float16 storage, tight enough to catch non-quaternions."""

FPS_RANGE = (1.0, 1000.0)
MAX_VALUES_PER_FRAME = 4096
"""Values one array may hold per frame (a humanoid clip has under 100): a header that claims more is not a clip."""
"""Accepted source frame rates: outside it a file is mislabelled (a duration, a period), not a motion."""

MAX_FRAMES = 3600 * CONTROL_FPS
"""Frames per clip, in the file and after resampling: an hour at the control rate. Checked from the array headers
and the frame rate before anything is decompressed or resampled, so a mislabelled rate cannot allocate gigabytes."""

MAX_TOTAL_FRAMES = 24 * 3600 * CONTROL_FPS
"""Frames of a whole library at the control rate: a day of motion, about 7.4 GiB of float32 tensors for the G1 (every
frame of every clip lives on the device). Checked with the memory it would take before any clip is decompressed."""

FLOAT_BYTES = 4

JOINT_LIMIT_MARGIN = 0.5
"""How far (rad, or m for slides) a clip may take a limited joint past the model's range: retargeting overshoots a
little; a clip in degrees, or scaled, goes far past it."""

MAX_BODY_DISTANCE = 5.0
"""Largest distance (m) of any body from the root body: farther means the wrong units or the wrong rows."""

_ROOT_QPOS = 7  # free joint: position (3) + quaternion (4)
_ROOT_QVEL = 6  # free joint: linear (3) + angular (3) velocity
_BODY_WIDTHS = {"body_pos_w": 3, "body_quat_w": 4, "body_lin_vel_w": 3, "body_ang_vel_w": 3}
_REQUIRED_KEYS = ("fps", "joint_pos", "joint_vel", *_BODY_WIDTHS)
_NAME_KEYS = ("joint_names", "body_names")
_WORLD_BODY = 0


@dataclass(frozen=True)
class MotionClips:
    """One or more clips concatenated along time, so that any frame of any clip is one index away.

    Clip ``c`` occupies frames ``clip_starts[c] : clip_starts[c] + clip_lengths[c]``. Joints follow
    the model's joint order (free root excluded); bodies follow MuJoCo body ids (0 = world).
    Quaternions are (w, x, y, z); velocities are in the world frame.
    """

    fps: int
    joint_pos: torch.Tensor  # (T, J)
    joint_vel: torch.Tensor  # (T, J)
    body_pos_w: torch.Tensor  # (T, B, 3)
    body_quat_w: torch.Tensor  # (T, B, 4)
    body_lin_vel_w: torch.Tensor  # (T, B, 3)
    body_ang_vel_w: torch.Tensor  # (T, B, 3)
    clip_starts: torch.Tensor  # (C,) long
    clip_lengths: torch.Tensor  # (C,) long
    clip_names: list[str]

    @property
    def num_frames(self) -> int:
        """Frames in the whole stream, all clips together."""
        return int(self.joint_pos.shape[0])

    @property
    def num_clips(self) -> int:
        """How many files went into the stream."""
        return len(self.clip_names)

    def to(self, device: str | torch.device) -> MotionClips:
        """The same clips on another device (the tensors are copied, the names shared)."""
        moved = {f.name: getattr(self, f.name).to(device) for f in fields(self) if f.name not in ("fps", "clip_names")}
        return replace(self, **moved)


@dataclass(frozen=True)
class _Clip:
    """One file's motion in the robot's order, before it goes to the device: float64 numpy arrays while it is checked
    and resampled, float32 once it is done."""

    joint_pos: np.ndarray
    joint_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray
    body_lin_vel_w: np.ndarray
    body_ang_vel_w: np.ndarray

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])


@dataclass(frozen=True)
class _RobotLayout:
    """Names the file's columns and rows are matched against, read from the model so no table can go stale."""

    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    joint_lower: np.ndarray  # (J,) -inf where the joint is unlimited
    joint_upper: np.ndarray  # (J,) +inf where the joint is unlimited
    root_body: int | None  # the body the free joint moves

    @classmethod
    def from_model(cls, model: mujoco.MjModel) -> _RobotLayout:
        joints = [j for j in range(model.njnt) if int(model.jnt_type[j]) != int(mujoco.mjtJoint.mjJNT_FREE)]
        scalar = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        if any(int(model.jnt_type[j]) not in scalar for j in joints):
            raise ValueError("motion clips support models whose non-root joints are all hinges or slides")
        joints.sort(key=lambda j: int(model.jnt_qposadr[j]))
        limited = model.jnt_limited[joints].astype(bool)
        free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
        return cls(
            joint_names=tuple(model.joint(j).name for j in joints),
            body_names=tuple(model.body(b).name for b in range(model.nbody)),
            joint_lower=np.where(limited, model.jnt_range[joints, 0], -np.inf),
            joint_upper=np.where(limited, model.jnt_range[joints, 1], np.inf),
            root_body=int(model.jnt_bodyid[free[0]]) if free else None,
        )


def _fail(path: Path, message: str) -> MotionFileError:
    return MotionFileError(f"{path}: {message}")


# What a damaged archive raises when opened or read: a bad checksum, bad deflate data, a truncated member.
_DAMAGED = (OSError, EOFError, zipfile.BadZipFile, zlib.error)


def _open_npz(path: Path) -> np.lib.npyio.NpzFile:
    """The archive, opened lazily: arrays are decompressed one by one when read, so unused ones never are.
    Pickled objects are refused because loading them can run code."""
    if not path.is_file():
        raise FileNotFoundError(f"motion file not found: {path}")
    # np.load reads any file that is not a zip as a pickle, and then says it refused one: name what it is instead.
    if not zipfile.is_zipfile(path):
        with path.open("rb") as handle:
            single = handle.read(6) == b"\x93NUMPY"
        what = "holds a single array" if single else "is not a zip archive"
        raise _fail(path, f"{what}, expected an .npz archive of named arrays")
    try:
        archive = np.load(path, allow_pickle=False)
    except (*_DAMAGED, ValueError) as err:
        raise _fail(path, f"not a readable .npz archive ({err})") from err
    return archive


def _header(path: Path, archive: np.lib.npyio.NpzFile, key: str) -> tuple[tuple[int, ...], np.dtype]:
    """An array's shape and dtype from its ``.npy`` header alone, without decompressing the data."""
    member = f"{key}.npy" if f"{key}.npy" in archive.zip.namelist() else key
    try:
        with archive.zip.open(member) as handle:
            major, _ = np.lib.format.read_magic(handle)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(handle)
    except (*_DAMAGED, ValueError) as err:
        raise _fail(path, f"key '{key}' has an unreadable array header ({err})") from err
    return shape, dtype


def _read_array(path: Path, archive: np.lib.npyio.NpzFile, key: str) -> np.ndarray:
    try:
        return archive[key]
    except ValueError as err:
        raise _fail(path, f"key '{key}' cannot be read without pickle ({err})") from err
    except _DAMAGED as err:
        raise _fail(path, f"key '{key}' is damaged ({type(err).__name__}: {err})") from err


def _planned_frames(path: Path, archive: np.lib.npyio.NpzFile) -> int:
    """Frames the clip will have at the control rate, from its frame rate and the ``joint_pos`` header alone;
    refuses a clip over the per-clip budget. 0 when the header has no frame axis (the shape check says why later)."""
    present = set(archive.files)
    missing = [key for key in _REQUIRED_KEYS if key not in present]
    if missing:
        raise _fail(path, f"missing key(s) {', '.join(repr(k) for k in missing)}; found {sorted(present)}")
    shape, dtype = _header(path, archive, "fps")  # read in full below: its header must not make that large
    if shape not in ((), (1,)):
        raise _fail(path, f"key 'fps' must be a number (shape () or (1,)), got {dtype} of shape {shape}")
    fps = _read_fps(path, _read_array(path, archive, "fps"))
    frames = _header(path, archive, "joint_pos")[0][:1]
    if not frames:
        return 0
    _check_frame_budget(path, frames[0], fps)
    _check_array_sizes(path, archive, frames[0])
    return _resampled_frames(frames[0], fps)


def _used_keys(archive: np.lib.npyio.NpzFile) -> list[str]:
    return [key for key in (*_REQUIRED_KEYS, *_NAME_KEYS) if key in archive.files]


def _check_array_sizes(path: Path, archive: np.lib.npyio.NpzFile, frames: int) -> None:
    """Every array a clip is built from, sized by its header before any is decompressed: a header may claim any
    shape, and the file's size says nothing of what its arrays inflate to."""
    limit = max(frames, 1) * MAX_VALUES_PER_FRAME * 8  # bytes, as float64
    for key in _used_keys(archive):
        shape, dtype = _header(path, archive, key)
        size = math.prod(shape) * dtype.itemsize
        if size > limit:
            raise _fail(
                path,
                f"key '{key}' claims shape {shape} of {dtype} ({size / 2**20:.0f} MiB): more than "
                f"{MAX_VALUES_PER_FRAME} values per frame of the clip's {frames} frames",
            )


def _read_used(path: Path, archive: np.lib.npyio.NpzFile) -> dict[str, np.ndarray]:
    """The arrays a clip is built from, and only those, once their sizes are known to be sane."""
    _planned_frames(path, archive)
    return {key: _read_array(path, archive, key) for key in _used_keys(archive)}


def _resampled_frames(frames: int, fps: float) -> int:
    """Frames at the control rate over the same duration, never past the last source frame (``_resample``'s count)."""
    if abs(fps - CONTROL_FPS) < 1e-9:
        return frames
    return int(np.floor((frames - 1) / fps * CONTROL_FPS + 1e-6)) + 1


def _check_frame_budget(path: Path, frames: int, fps: float) -> None:
    resampled = _resampled_frames(frames, fps)
    if max(frames, resampled) > MAX_FRAMES:
        raise _fail(
            path,
            f"{frames} frames at {fps:g} fps would be {resampled} frames at {CONTROL_FPS} Hz; a clip may have at "
            f"most {MAX_FRAMES} (an hour), in the file and after resampling",
        )


def _read_fps(path: Path, value: np.ndarray) -> float:
    real = np.issubdtype(value.dtype, np.integer) or np.issubdtype(value.dtype, np.floating)
    if value.shape not in ((), (1,)) or not real:
        raise _fail(path, f"key 'fps' must be a number (shape () or (1,)), got {value.dtype} of shape {value.shape}")
    fps = float(value.reshape(()))
    low, high = FPS_RANGE
    if not low <= fps <= high:  # NaN fails both comparisons
        raise _fail(path, f"key 'fps' must be a finite positive frame rate in [{low:g}, {high:g}] Hz, got {fps}")
    return fps


def _read_names(path: Path, data: dict[str, np.ndarray], key: str) -> tuple[str, ...] | None:
    """Names in file order, or None when the file relies on model order."""
    if key not in data:
        return None
    value = data[key]
    if value.ndim != 1 or value.dtype.kind not in "US":
        raise _fail(path, f"key '{key}' must be a 1-D array of strings, got {value.dtype} of shape {value.shape}")
    names = tuple(v.decode() if isinstance(v, bytes) else str(v) for v in value.tolist())
    if not names:  # an empty list would otherwise read as "no names given" and silently assume model order
        raise _fail(path, f"key '{key}' is empty; it must name every column or row, or be left out")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise _fail(path, f"key '{key}' repeats name(s) {duplicates}")
    return names


def _check_shape(path: Path, key: str, value: np.ndarray, expected: tuple[int | None, ...]) -> None:
    """``None`` in ``expected`` stands for the frame axis, whose length is checked across keys later."""
    matches = value.ndim == len(expected) and all(
        e is None or e == s for e, s in zip(expected, value.shape, strict=True)
    )
    if not matches:
        shown = "(" + ", ".join("T" if e is None else str(e) for e in expected) + ")"
        raise _fail(path, f"key '{key}' has shape {value.shape}, expected {shown}")
    if not (np.issubdtype(value.dtype, np.integer) or np.issubdtype(value.dtype, np.floating)):
        raise _fail(path, f"key '{key}' must hold real numbers, got dtype {value.dtype}")


def _check_frames(path: Path, data: dict[str, np.ndarray]) -> int:
    """The common frame count; clips shorter than two frames have no duration to play or resample."""
    keys = _REQUIRED_KEYS[1:]
    counts = {key: data[key].shape[0] for key in keys}
    first = keys[0]
    for key, count in counts.items():
        if count != counts[first]:
            raise _fail(path, f"key '{key}' has {count} frames but '{first}' has {counts[first]}")
    if counts[first] < 2:
        raise _fail(path, f"a clip needs at least 2 frames, key '{first}' has {counts[first]}")
    return counts[first]


def _check_finite(path: Path, data: dict[str, np.ndarray]) -> None:
    for key in _REQUIRED_KEYS:
        bad = ~np.isfinite(data[key])
        if bad.any():
            frame = int(np.argwhere(bad)[0][0]) if data[key].ndim else 0
            raise _fail(path, f"key '{key}' has {int(bad.sum())} non-finite value(s) (NaN/inf), first at frame {frame}")


def _check_unit(path: Path, key: str, q: np.ndarray, where: str = "") -> None:
    error = np.abs(np.linalg.norm(q, axis=-1) - 1.0)
    if error.max() > QUAT_NORM_TOLERANCE:
        raise _fail(
            path,
            f"key '{key}'{where} holds quaternions that are not unit length (worst | |q| - 1 | = {error.max():.3g}, "
            f"tolerance {QUAT_NORM_TOLERANCE})",
        )


def _match_names(path: Path, kind: str, wanted: Sequence[str], present: Sequence[str]) -> list[int]:
    """Index in ``present`` of each wanted name; a missing name is an error, listed in full."""
    index = {name: i for i, name in enumerate(present)}
    missing = [name for name in wanted if name not in index]
    if missing:
        raise _fail(path, f"{kind} name(s) missing from the file: {missing}")
    return [index[name] for name in wanted]


def _joint_layout(path: Path, data: dict[str, np.ndarray], robot: _RobotLayout) -> tuple[tuple[str, ...], bool]:
    """File joint names and whether a free root leads the columns.

    Unknown joints are refused rather than dropped: a file that drives joints this robot lacks
    was made for another robot, and replaying the rest would silently change the motion.
    """
    given = _read_names(path, data, "joint_names")
    names = robot.joint_names if given is None else given
    missing = [name for name in robot.joint_names if name not in names]
    unknown = [name for name in names if name not in robot.joint_names]
    if missing or unknown:
        raise _fail(
            path, f"joint name(s) missing from the file: {missing}; joint name(s) unknown to the robot: {unknown}"
        )
    width = data["joint_pos"].shape[-1] if data["joint_pos"].ndim == 2 else -1
    has_root = width == len(names) + _ROOT_QPOS
    if has_root and given is None:
        raise _fail(path, "key 'joint_names' is missing; a full-state joint_pos (free root first) must name its joints")
    return names, has_root


def _check_layout_shapes(
    path: Path, data: dict[str, np.ndarray], num_joints: int, has_root: bool, num_bodies: int
) -> None:
    _check_shape(path, "joint_pos", data["joint_pos"], (None, num_joints + (_ROOT_QPOS if has_root else 0)))
    _check_shape(path, "joint_vel", data["joint_vel"], (None, num_joints + (_ROOT_QVEL if has_root else 0)))
    for key, width in _BODY_WIDTHS.items():
        _check_shape(path, key, data[key], (None, num_bodies, width))


def _select_joints(
    path: Path, data: dict[str, np.ndarray], robot: _RobotLayout, names: tuple[str, ...], has_root: bool
) -> tuple[np.ndarray, np.ndarray]:
    columns = np.asarray(_match_names(path, "joint", robot.joint_names, names), dtype=np.int64)
    pos = data["joint_pos"].astype(np.float64)
    vel = data["joint_vel"].astype(np.float64)
    if has_root:
        _check_unit(path, "joint_pos", pos[:, 3:_ROOT_QPOS], where=" (root quaternion, columns 3:7)")
        return pos[:, _ROOT_QPOS + columns], vel[:, _ROOT_QVEL + columns]
    return pos[:, columns], vel[:, columns]


def _select_bodies(
    path: Path, data: dict[str, np.ndarray], robot: _RobotLayout, names: tuple[str, ...]
) -> dict[str, np.ndarray]:
    """Body arrays in model order; a world body the file leaves out is the fixed identity frame."""
    wanted = [name for b, name in enumerate(robot.body_names) if b != _WORLD_BODY or name in names]
    rows = _match_names(path, "body", wanted, names)
    targets = [b for b, name in enumerate(robot.body_names) if name in wanted]
    frames = data["body_pos_w"].shape[0]
    selected = {}
    for key, width in _BODY_WIDTHS.items():
        out = np.zeros((frames, len(robot.body_names), width), dtype=np.float64)
        if key == "body_quat_w":
            out[..., 0] = 1.0
        out[:, targets] = data[key][:, rows].astype(np.float64)
        selected[key] = out
    _check_unit(path, "body_quat_w", selected["body_quat_w"])
    selected["body_quat_w"] = quat_normalize(torch.from_numpy(selected["body_quat_w"])).numpy()
    return selected


def _check_plausible(path: Path, clip: _Clip, robot: _RobotLayout, body_names: Sequence[str]) -> None:
    """Refuse motion no robot could make: joints far past their limits, bodies far from the root."""
    below = clip.joint_pos < robot.joint_lower - JOINT_LIMIT_MARGIN
    above = clip.joint_pos > robot.joint_upper + JOINT_LIMIT_MARGIN
    outside = below | above
    if outside.any():
        frame, joint = (int(i) for i in np.argwhere(outside)[0])
        raise _fail(
            path,
            f"joint '{robot.joint_names[joint]}' is at {clip.joint_pos[frame, joint]:.4g} at frame {frame}, outside "
            f"its limits [{robot.joint_lower[joint]:.4g}, {robot.joint_upper[joint]:.4g}] by more than "
            f"{JOINT_LIMIT_MARGIN} (wrong units or scale?)",
        )
    if robot.root_body is None:
        return
    given = [b for b, name in enumerate(robot.body_names) if b != _WORLD_BODY and name in body_names]
    offsets = clip.body_pos_w[:, given] - clip.body_pos_w[:, robot.root_body : robot.root_body + 1]
    distance = np.linalg.norm(offsets, axis=-1)
    if distance.max() > MAX_BODY_DISTANCE:
        frame, row = (int(i) for i in np.unravel_index(np.argmax(distance), distance.shape))
        raise _fail(
            path,
            f"body '{robot.body_names[given[row]]}' is {distance[frame, row]:.4g} m from the root body "
            f"'{robot.body_names[robot.root_body]}' at frame {frame} (limit {MAX_BODY_DISTANCE} m)",
        )


def _resample(path: Path, clip: _Clip, fps: float) -> _Clip:
    """The clip at ``CONTROL_FPS`` over the same duration, never extrapolating past the last frame."""
    if abs(fps - CONTROL_FPS) < 1e-9:
        return clip
    duration = (clip.num_frames - 1) / fps
    num_out = _resampled_frames(clip.num_frames, fps)
    if num_out < 2:
        raise _fail(path, f"clip lasts {duration:.4g} s, shorter than one control step (1/{CONTROL_FPS} s)")
    source = np.minimum(np.arange(num_out) * (fps / CONTROL_FPS), clip.num_frames - 1)
    lower = np.minimum(np.floor(source).astype(np.int64), clip.num_frames - 2)
    weight = source - lower

    def blend(a: np.ndarray) -> np.ndarray:
        w = weight.reshape((-1,) + (1,) * (a.ndim - 1))
        return (1.0 - w) * a[lower] + w * a[lower + 1]

    quats = torch.from_numpy(clip.body_quat_w)
    w_quat = torch.from_numpy(weight).reshape(-1, 1, 1)
    return _Clip(
        joint_pos=blend(clip.joint_pos),
        joint_vel=blend(clip.joint_vel),
        body_pos_w=blend(clip.body_pos_w),
        body_quat_w=quat_nlerp(quats[lower], quats[lower + 1], w_quat).numpy(),
        body_lin_vel_w=blend(clip.body_lin_vel_w),
        body_ang_vel_w=blend(clip.body_ang_vel_w),
    )


def _load_clip(path: Path, robot: _RobotLayout) -> _Clip:
    """Validate one file and return its motion in the robot's order at the control rate, as float32: the library
    is assembled from these, so the float64 working copies live one clip at a time."""
    with _open_npz(path) as archive:
        data = _read_used(path, archive)
    fps = _read_fps(path, data["fps"])
    joint_names, has_root = _joint_layout(path, data, robot)
    given_bodies = _read_names(path, data, "body_names")
    body_names = robot.body_names if given_bodies is None else given_bodies
    _check_layout_shapes(path, data, len(joint_names), has_root, len(body_names))
    _check_frames(path, data)
    _check_finite(path, data)
    joint_pos, joint_vel = _select_joints(path, data, robot, joint_names, has_root)
    clip = _Clip(joint_pos=joint_pos, joint_vel=joint_vel, **_select_bodies(path, data, robot, body_names))
    _check_plausible(path, clip, robot, body_names)
    resampled = _resample(path, clip, fps)
    return _Clip(**{f.name: getattr(resampled, f.name).astype(np.float32) for f in fields(_Clip)})


def _library_bytes(frames: int, robot: _RobotLayout) -> int:
    """Device memory of ``frames`` frames of motion for ``robot``: joint positions and velocities, and each body's
    pose and velocities, as float32."""
    per_frame = 2 * len(robot.joint_names) + len(robot.body_names) * sum(_BODY_WIDTHS.values())
    return FLOAT_BYTES * per_frame * frames


def _check_library_budget(files: Sequence[Path], robot: _RobotLayout) -> None:
    """Refuse a library too large to hold, from every file's header before any clip is decompressed (each clip's
    own budget is checked on the way)."""
    planned = []
    for path in files:
        with _open_npz(path) as archive:
            planned.append(_planned_frames(path, archive))
    total = sum(planned)
    if total > MAX_TOTAL_FRAMES:
        largest = sorted(zip(planned, files, strict=True), reverse=True)[:3]
        raise MotionFileError(
            f"{len(files)} motion files hold {total} frames at {CONTROL_FPS} Hz, about "
            f"{_library_bytes(total, robot) / 2**30:.1f} GiB of float32 tensors; a library may hold at most "
            f"{MAX_TOTAL_FRAMES} frames ({MAX_TOTAL_FRAMES / CONTROL_FPS / 3600:g} h). Largest: "
            + ", ".join(f"{path.name} ({count} frames)" for count, path in largest)
        )


def _to_device(array: np.ndarray, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(device)


def load_motions(spec: MotionSpec, model: mujoco.MjModel, device: str | torch.device = "cpu") -> MotionClips:
    """Read a motion file, a directory of them or a list of either (``motion_files``) for ``model`` into one 50 Hz
    stream on ``device``, clips in library order.

    Raises ``MotionFileError`` (a ``ValueError``) naming the file and the offending key or name
    when a file does not describe a motion of this robot, or when the library is too large.
    """
    device = torch.device(device)
    robot = _RobotLayout.from_model(model)
    files = motion_files(spec)
    _check_library_budget(files, robot)
    clips = [_load_clip(path, robot) for path in files]
    lengths = np.array([clip.num_frames for clip in clips], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    arrays = {f.name: _to_device(np.concatenate([getattr(c, f.name) for c in clips]), device) for f in fields(_Clip)}
    return MotionClips(
        fps=CONTROL_FPS,
        clip_starts=torch.from_numpy(starts).to(device),
        clip_lengths=torch.from_numpy(lengths).to(device),
        clip_names=[path.stem for path in files],
        **arrays,
    )
