"""Motion clips: the shipped reference clip, both file formats, resampling, and refusing bad files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from unilab.core.math import quat_rotate, quat_rotate_inverse
from unilab.motion import CONTROL_FPS, DEFAULT_MOTION, MotionClips, MotionFileError, load_motions
from unilab.robots.g1 import BODY_NAMES, DEFAULT_JOINT_POS, JOINT_NAMES
from unilab.robots.g1.reference import generate_reference_clip

FRAMES = 501  # 10 s at 50 Hz, both ends included
FK_TOL = 1e-5


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return quat_rotate(torch.from_numpy(q), torch.from_numpy(np.ascontiguousarray(v))).numpy()


def rotate_inverse(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return quat_rotate_inverse(torch.from_numpy(q), torch.from_numpy(v)).numpy()


TENSOR_KEYS = ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")


@pytest.fixture(scope="module")
def clip(model: mujoco.MjModel) -> MotionClips:
    return load_motions(DEFAULT_MOTION, model, "cpu")


def _save(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    np.savez(path, **arrays)
    return path


def _numpy(clips: MotionClips) -> dict[str, np.ndarray]:
    return {key: getattr(clips, key).numpy().astype(np.float64) for key in TENSOR_KEYS}


def _foot_sites(model: mujoco.MjModel, clips: MotionClips) -> np.ndarray:
    """World positions (T, 2, 3) of the foot sites, from the clip's body poses alone."""
    sites = [model.site(name) for name in ("left_foot", "right_foot")]
    bodies = [int(site.bodyid[0]) for site in sites]
    offsets = np.stack([model.site_pos[site.id] for site in sites])
    pos = clips.body_pos_w.numpy()[:, bodies].astype(np.float64)
    rot = clips.body_quat_w.numpy()[:, bodies].astype(np.float64)
    return pos + rotate(rot, np.broadcast_to(offsets, pos.shape))


def _stand_data(model: mujoco.MjModel) -> mujoco.MjData:
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    mujoco.mj_kinematics(model, data)
    return data


# --- the shipped clip -------------------------------------------------------------------------


def test_shipped_clip_layout(clip: MotionClips) -> None:
    assert clip.fps == CONTROL_FPS == 50
    assert clip.num_frames == FRAMES
    assert clip.joint_pos.shape == clip.joint_vel.shape == (FRAMES, len(JOINT_NAMES))
    for key, width in (("body_pos_w", 3), ("body_quat_w", 4), ("body_lin_vel_w", 3), ("body_ang_vel_w", 3)):
        assert getattr(clip, key).shape == (FRAMES, len(BODY_NAMES), width)
    for key in TENSOR_KEYS:
        assert getattr(clip, key).dtype == torch.float32
        assert getattr(clip, key).device == torch.device("cpu")
    assert clip.clip_starts.tolist() == [0]
    assert clip.clip_lengths.tolist() == [FRAMES]
    assert clip.clip_starts.dtype == clip.clip_lengths.dtype == torch.long
    assert clip.clip_names == ["g1_reference_sway"]
    assert DEFAULT_MOTION.stat().st_size < 2 * 1024 * 1024


def test_shipped_clip_quaternions_are_unit(clip: MotionClips) -> None:
    norms = clip.body_quat_w.double().norm(dim=-1)
    torch.testing.assert_close(norms, torch.ones_like(norms), atol=1e-6, rtol=0)


def test_shipped_clip_starts_and_ends_at_rest_in_the_stand_pose(clip: MotionClips) -> None:
    stand = torch.tensor(DEFAULT_JOINT_POS)
    for frame in (0, -1):
        torch.testing.assert_close(clip.joint_pos[frame].double(), stand.double(), atol=1e-3, rtol=0)
        assert clip.joint_vel[frame].abs().max() < 1e-2
    # It actually moves in between: a squat and arm swings, not a still pose.
    assert (clip.joint_pos - clip.joint_pos[0]).abs().amax(dim=0).max() > 0.5
    assert clip.body_pos_w[:, 1, 2].min() < clip.body_pos_w[0, 1, 2] - 0.1


def test_shipped_clip_respects_joint_ranges(model: mujoco.MjModel, clip: MotionClips) -> None:
    ranges = torch.tensor(np.stack([model.jnt_range[model.joint(name).id] for name in JOINT_NAMES]))
    assert (clip.joint_pos.double() >= ranges[:, 0]).all()
    assert (clip.joint_pos.double() <= ranges[:, 1]).all()


def test_pelvis_is_the_root_above_the_stand_position(model: mujoco.MjModel, clip: MotionClips) -> None:
    stand_root = model.key("stand").qpos[:3]
    pelvis = clip.body_pos_w[:, BODY_NAMES.index("pelvis")].double()
    torch.testing.assert_close(pelvis[:, :2], torch.tensor(stand_root[:2]).expand(FRAMES, 2), atol=1e-6, rtol=0)
    torch.testing.assert_close(pelvis[0, 2].item(), float(stand_root[2]), atol=1e-3, rtol=0)
    identity = torch.tensor([1.0, 0.0, 0.0, 0.0]).expand(FRAMES, 4)
    torch.testing.assert_close(clip.body_quat_w[:, 1], identity, atol=1e-6, rtol=0)


def test_feet_stay_flat_on_the_ground_without_sliding(model: mujoco.MjModel, clip: MotionClips) -> None:
    ground = min(_stand_data(model).site_xpos[model.site(name).id, 2] for name in ("left_foot", "right_foot"))
    feet = _foot_sites(model, clip)
    np.testing.assert_allclose(feet[..., 2].min(axis=1), ground, atol=1e-5)
    # Both feet, not just the lower one, and they do not drift horizontally either.
    np.testing.assert_allclose(feet[..., 2], ground, atol=1e-4)
    np.testing.assert_allclose(feet[..., :2], np.broadcast_to(feet[:1, :, :2], feet[..., :2].shape), atol=1e-4)


def test_body_poses_match_forward_kinematics(model: mujoco.MjModel, clip: MotionClips) -> None:
    data = mujoco.MjData(model)
    for frame in (0, 57, 125, 250, 377, FRAMES - 1):
        data.qpos[:3] = clip.body_pos_w[frame, 1].numpy()
        data.qpos[3:7] = clip.body_quat_w[frame, 1].numpy()
        data.qpos[7:] = clip.joint_pos[frame].numpy()
        mujoco.mj_kinematics(model, data)
        np.testing.assert_allclose(clip.body_pos_w[frame].numpy(), data.xpos, atol=FK_TOL, rtol=0)
        stored = clip.body_quat_w[frame].numpy().astype(np.float64)
        aligned = np.where(np.sum(data.xquat * stored, axis=-1, keepdims=True) < 0.0, -stored, stored)  # q ~ -q
        np.testing.assert_allclose(aligned, data.xquat, atol=FK_TOL, rtol=0)


def test_velocities_match_mujoco_body_velocities(model: mujoco.MjModel, clip: MotionClips) -> None:
    """Finite-difference velocities against MuJoCo's exact ones for the same qpos, qvel.

    Central differences at 50 Hz err by about dt^2/6 |f'''| (a few 1e-4 rad/s or m/s for this
    clip's 0.2-0.4 Hz content), hence 2e-3; a wrong frame (body vs world) or a sign error would be
    off by the velocity itself, up to ~1.5 rad/s here.
    """
    data = mujoco.MjData(model)
    result = np.empty(6)
    for frame in (0, 60, 125, 250, 333, 440):
        pelvis_quat = clip.body_quat_w[frame, 1].numpy().astype(np.float64)
        data.qpos[:3] = clip.body_pos_w[frame, 1].numpy()
        data.qpos[3:7] = pelvis_quat
        data.qpos[7:] = clip.joint_pos[frame].numpy()
        data.qvel[:3] = clip.body_lin_vel_w[frame, 1].numpy()
        data.qvel[3:6] = rotate_inverse(pelvis_quat, clip.body_ang_vel_w[frame, 1].numpy().astype(np.float64))
        data.qvel[6:] = clip.joint_vel[frame].numpy()
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_comVel(model, data)
        for body in range(1, model.nbody):
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, result, 0)
            np.testing.assert_allclose(clip.body_ang_vel_w[frame, body].numpy(), result[:3], atol=2e-3, rtol=0)
            np.testing.assert_allclose(clip.body_lin_vel_w[frame, body].numpy(), result[3:], atol=2e-3, rtol=0)


def test_clips_move_to_another_device_object(clip: MotionClips) -> None:
    moved = clip.to("cpu")
    assert moved.num_frames == clip.num_frames and moved.clip_names == clip.clip_names
    assert torch.equal(moved.body_pos_w, clip.body_pos_w)


# --- format B and names -----------------------------------------------------------------------


def _format_b(raw: dict[str, np.ndarray], include_world: bool, seed: int = 0) -> dict[str, np.ndarray]:
    """The shipped clip rewritten holosoma-style: full qpos/qvel, shuffled joints, extra shuffled bodies."""
    rng = np.random.default_rng(seed)
    joints = rng.permutation(len(JOINT_NAMES))
    pelvis_quat = raw["body_quat_w"][:, 1].astype(np.float64)
    ang_local = rotate_inverse(pelvis_quat, raw["body_ang_vel_w"][:, 1].astype(np.float64))
    frames = raw["joint_pos"].shape[0]
    first = 0 if include_world else 1
    names = [*raw["body_names"][first:].tolist(), "head_link", "left_toe_link", "right_toe_link"]
    names += [f"marker_{i}" for i in range(51 - len(names))]
    extra = len(names) - (len(BODY_NAMES) - first)
    order = rng.permutation(len(names))
    arrays = {
        "fps": np.array([raw["fps"]]),
        "joint_names": raw["joint_names"][joints],
        "body_names": np.array(names)[order],
        "joint_pos": np.concatenate(
            [raw["body_pos_w"][:, 1], raw["body_quat_w"][:, 1], raw["joint_pos"][:, joints]], axis=1
        ),
        "joint_vel": np.concatenate(
            [raw["body_lin_vel_w"][:, 1], ang_local.astype(np.float32), raw["joint_vel"][:, joints]], axis=1
        ),
    }
    for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        filler = rng.normal(size=(frames, extra, raw[key].shape[-1])).astype(np.float32)
        if key == "body_quat_w":
            filler /= np.linalg.norm(filler, axis=-1, keepdims=True)
        arrays[key] = np.concatenate([raw[key][:, first:], filler], axis=1)[:, order]
    return arrays


@pytest.mark.parametrize("include_world", [False, True])
def test_format_b_is_matched_by_name(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], clip: MotionClips, include_world: bool
) -> None:
    arrays = _format_b(raw, include_world)
    assert arrays["joint_pos"].shape == (FRAMES, 36) and arrays["joint_vel"].shape == (FRAMES, 35)
    assert arrays["body_pos_w"].shape[1] == 51
    loaded = load_motions(_save(tmp_path / "holosoma.npz", arrays), model)
    for key in TENSOR_KEYS:
        assert torch.equal(getattr(loaded, key), getattr(clip, key)), key


def test_format_a_without_names_follows_model_order(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], clip: MotionClips
) -> None:
    nameless = {k: v for k, v in raw.items() if k not in ("joint_names", "body_names")}
    loaded = load_motions(_save(tmp_path / "nameless.npz", nameless), model)
    for key in TENSOR_KEYS:
        assert torch.equal(getattr(loaded, key), getattr(clip, key)), key


def test_format_a_honours_names_when_present(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], clip: MotionClips
) -> None:
    rng = np.random.default_rng(1)
    joints, bodies = rng.permutation(len(JOINT_NAMES)), rng.permutation(len(BODY_NAMES))
    shuffled = dict(raw, joint_names=raw["joint_names"][joints], body_names=raw["body_names"][bodies])
    shuffled.update({k: raw[k][:, joints] for k in ("joint_pos", "joint_vel")})
    shuffled.update({k: raw[k][:, bodies] for k in TENSOR_KEYS[2:]})
    loaded = load_motions(_save(tmp_path / "shuffled.npz", shuffled), model)
    for key in TENSOR_KEYS:
        assert torch.equal(getattr(loaded, key), getattr(clip, key)), key


# --- resampling -------------------------------------------------------------------------------


def _interpolation_bounds(reference: dict[str, np.ndarray], step: float) -> dict[str, float]:
    """Per key, the linear-interpolation error bound step^2 / 8 * max |f''| (+ float32 noise).

    f'' is estimated from the 50 Hz reference by second differences; the factor 1.5 covers that
    estimate being itself slightly off. nlerp on unit quaternions stays within the same bound up
    to the renormalisation, which shrinks the error rather than growing it.
    """
    bounds = {}
    for key, value in reference.items():
        curvature = np.abs(np.diff(value, n=2, axis=0)).max() * CONTROL_FPS**2
        bounds[key] = 1.5 * step**2 / 8.0 * curvature + 1e-5
    return bounds


def test_resampling_25hz_to_50hz_stays_within_the_interpolation_bound(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], clip: MotionClips
) -> None:
    decimated = {k: (v[::2] if k in TENSOR_KEYS else v) for k, v in raw.items()}
    decimated["fps"] = np.array(25.0)
    loaded = load_motions(_save(tmp_path / "clip_25hz.npz", decimated), model)
    assert loaded.fps == 50 and loaded.num_frames == FRAMES
    reference, resampled = _numpy(clip), _numpy(loaded)
    bounds = _interpolation_bounds(reference, 1.0 / 25.0)
    for key in TENSOR_KEYS:
        # Frames at shared instants are copied, which pins the time alignment exactly ...
        np.testing.assert_allclose(resampled[key][::2], reference[key][::2], atol=1e-6, rtol=0, err_msg=key)
        # ... and the midpoints in between are within the linear-interpolation error.
        assert np.abs(resampled[key] - reference[key]).max() <= bounds[key], key
    assert bounds["joint_pos"] < 5e-3 and bounds["body_pos_w"] < 5e-3  # the bound itself is a meaningful one


def test_resampling_30hz_to_50hz_with_fractional_weights(
    tmp_path: Path, model: mujoco.MjModel, clip: MotionClips
) -> None:
    """A 30 Hz rendering of the same motion (fresh FK, no shared frames apart from every 0.1 s).

    Poses must agree within the interpolation bound at 1/30 s. Velocities are finite differences
    at different steps in the two files, which differ by ~1e-3 here, so they get 1e-2: a frame of
    misalignment would cost |dv/dt| / 50, several times more.
    """
    generated = generate_reference_clip(model, fps=30.0)
    loaded = load_motions(_save(tmp_path / "clip_30hz.npz", generated), model)
    assert loaded.num_frames == FRAMES
    reference, resampled = _numpy(clip), _numpy(loaded)
    bounds = _interpolation_bounds(reference, 1.0 / 30.0)
    for key in ("joint_pos", "body_pos_w", "body_quat_w"):
        assert np.abs(resampled[key] - reference[key]).max() <= bounds[key], key
    for key in ("joint_vel", "body_lin_vel_w", "body_ang_vel_w"):
        assert np.abs(resampled[key] - reference[key]).max() <= 1e-2, key


def test_upsampled_clip_ends_on_its_last_frame(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]
) -> None:
    """A duration that is no whole number of control steps is cut short rather than extrapolated."""
    short = {k: (v[:6] if k in TENSOR_KEYS else v) for k, v in raw.items()}
    short["fps"] = np.array(12.0)  # 5 intervals = 0.41667 s -> frames at 0, 0.02, ..., 0.40 s
    loaded = load_motions(_save(tmp_path / "short.npz", short), model)
    assert loaded.num_frames == 21
    np.testing.assert_allclose(loaded.joint_pos[0].numpy(), raw["joint_pos"][0], atol=1e-7)


# --- several clips ----------------------------------------------------------------------------


def test_several_files_form_one_stream(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], clip: MotionClips
) -> None:
    short = {k: (v[:101] if k in TENSOR_KEYS else v) for k, v in raw.items()}
    short_path = _save(tmp_path / "first_two_seconds.npz", short)
    stream = load_motions([short_path, DEFAULT_MOTION], model, torch.device("cpu"))
    assert stream.clip_starts.tolist() == [0, 101]
    assert stream.clip_lengths.tolist() == [101, FRAMES]
    assert stream.clip_names == ["first_two_seconds", "g1_reference_sway"]
    assert stream.num_frames == 101 + FRAMES
    for key in TENSOR_KEYS:
        assert torch.equal(getattr(stream, key)[:101], getattr(clip, key)[:101]), key
        assert torch.equal(getattr(stream, key)[101:], getattr(clip, key)), key


# --- malformed files --------------------------------------------------------------------------


def _drop(key: str) -> Callable[[dict[str, np.ndarray]], None]:
    return lambda a: a.pop(key)


def _set(key: str, value: Callable[[dict[str, np.ndarray]], np.ndarray]) -> Callable[[dict[str, np.ndarray]], None]:
    def mutate(arrays: dict[str, np.ndarray]) -> None:
        arrays[key] = value(arrays)

    return mutate


def _poison(key: str, value: float) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    def poisoned(arrays: dict[str, np.ndarray]) -> np.ndarray:
        out = arrays[key].copy()
        out.reshape(-1)[out.size // 2] = value
        return out

    return poisoned


def _rename(key: str, old: str, new: str) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    return lambda a: np.array([new if n == old else n for n in a[key].tolist()])


MALFORMED = {
    "missing key": (_drop("body_quat_w"), r"missing key.*'body_quat_w'"),
    "joint columns": (_set("joint_pos", lambda a: a["joint_pos"][:, :28]), r"'joint_pos'.*\(501, 28\).*\(T, 29\)"),
    "joint ndim": (_set("joint_vel", lambda a: a["joint_vel"][:, :, None]), r"'joint_vel'.*\(501, 29, 1\)"),
    "body rows": (_set("body_lin_vel_w", lambda a: a["body_lin_vel_w"][:, :30]), r"'body_lin_vel_w'.*\(T, 31, 3\)"),
    "quat width": (_set("body_quat_w", lambda a: a["body_quat_w"][..., :3]), r"'body_quat_w'.*\(T, 31, 4\)"),
    "frame counts": (_set("joint_vel", lambda a: a["joint_vel"][:-1]), r"'joint_vel' has 500 frames.*501"),
    "NaN": (_set("body_ang_vel_w", _poison("body_ang_vel_w", np.nan)), r"'body_ang_vel_w'.*non-finite"),
    "inf": (_set("joint_pos", _poison("joint_pos", np.inf)), r"'joint_pos'.*non-finite"),
    "fps zero": (_set("fps", lambda a: np.array(0.0)), r"'fps'.*positive"),
    "fps negative": (_set("fps", lambda a: np.array([-50.0])), r"'fps'.*positive"),
    "fps NaN": (_set("fps", lambda a: np.array(np.nan)), r"'fps'"),
    "fps shape": (_set("fps", lambda a: np.array([50.0, 50.0])), r"'fps'.*shape"),
    "fps too low": (_set("fps", lambda a: np.array(0.02)), r"'fps'.*\[1, 1000\] Hz, got 0\.02"),
    "fps too high": (_set("fps", lambda a: np.array(5000.0)), r"'fps'.*\[1, 1000\] Hz"),
    "joints x100": (
        _set("joint_pos", lambda a: a["joint_pos"] * 100.0),
        r"joint '\w+' is at .* outside its limits \[.*\] by more than 0\.5",
    ),
    "body 50 m away": (
        _set("body_pos_w", lambda a: a["body_pos_w"] + np.array([0.0, 50.0, 0.0]) * (np.arange(31) == 20)[:, None]),
        rf"body '{BODY_NAMES[20]}' is 50(\.\d+)? m from the root body 'pelvis' at frame \d+ \(limit 5\.0 m\)",
    ),
    "empty joint_names": (_set("joint_names", lambda a: np.array([], dtype="<U1")), r"'joint_names' is empty"),
    "empty body_names": (_set("body_names", lambda a: np.array([], dtype="<U1")), r"'body_names' is empty"),
    "non-unit quat": (_set("body_quat_w", lambda a: a["body_quat_w"] * 1.1), r"'body_quat_w'.*unit"),
    "missing joint": (
        _set("joint_names", _rename("joint_names", "left_knee_joint", "left_knee")),
        r"missing from the file: \['left_knee_joint'\]",
    ),
    "missing body": (
        _set("body_names", _rename("body_names", "torso_link", "chest")),
        r"body name\(s\) missing from the file: \['torso_link'\]",
    ),
    "duplicate joint": (
        _set("joint_names", _rename("joint_names", "left_knee_joint", "right_knee_joint")),
        r"'joint_names' repeats.*right_knee_joint",
    ),
    "names not strings": (_set("joint_names", lambda a: np.arange(29)), r"'joint_names'.*strings"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_are_refused_with_a_precise_message(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], case: str
) -> None:
    mutate, pattern = MALFORMED[case]
    arrays = dict(raw)
    mutate(arrays)
    path = _save(tmp_path / "bad.npz", arrays)
    with pytest.raises(MotionFileError, match=pattern) as info:
        load_motions(path, model)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_single_frame_clip_is_refused(tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]) -> None:
    single = {k: (v[:1] if k in TENSOR_KEYS else v) for k, v in raw.items()}
    with pytest.raises(MotionFileError, match="at least 2 frames"):
        load_motions(_save(tmp_path / "still.npz", single), model)


def test_format_b_root_quaternion_is_checked(tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]) -> None:
    arrays = _format_b(raw, include_world=False)
    arrays["joint_pos"][:, 3:7] *= 2.0
    with pytest.raises(MotionFileError, match=r"'joint_pos'.*unit"):
        load_motions(_save(tmp_path / "bad_root.npz", arrays), model)


def test_unknown_joint_is_refused(tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]) -> None:
    arrays = _format_b(raw, include_world=False)
    arrays["joint_names"] = np.append(arrays["joint_names"], "left_thumb_joint")
    arrays["joint_pos"] = np.concatenate([arrays["joint_pos"], arrays["joint_pos"][:, -1:]], axis=1)
    arrays["joint_vel"] = np.concatenate([arrays["joint_vel"], arrays["joint_vel"][:, -1:]], axis=1)
    with pytest.raises(MotionFileError, match=r"unknown to the robot: \['left_thumb_joint'\]"):
        load_motions(_save(tmp_path / "hands.npz", arrays), model)


def test_unreadable_and_pickled_files_are_refused(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]
) -> None:
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip archive")
    with pytest.raises(MotionFileError, match=r"garbage\.npz: is not a zip archive, expected an \.npz archive"):
        load_motions(garbage, model)
    pickled = _save(tmp_path / "pickled.npz", {**raw, "joint_pos": np.array([{}] * FRAMES, dtype=object)})
    with pytest.raises(MotionFileError, match=r"'joint_pos'.*pickle"):
        load_motions(pickled, model)
    single = tmp_path / "single.npy"
    np.save(single, np.zeros(3))
    with pytest.raises(MotionFileError, match="single array"):
        load_motions(single, model)
    with pytest.raises(FileNotFoundError):
        load_motions(tmp_path / "absent.npz", model)


def test_damaged_archives_and_complex_arrays_are_refused(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]
) -> None:
    """Bytes flipped inside a member: a stored member fails its checksum, a deflated one its decompression."""
    stored = _save(tmp_path / "stored.npz", raw)
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    with pytest.raises(MotionFileError, match=r"stored\.npz: key '\w+' is damaged \(BadZipFile"):
        load_motions(stored, model)
    deflated = tmp_path / "deflated.npz"
    np.savez_compressed(deflated, **raw)
    data = bytearray(deflated.read_bytes())
    data[200:260] = bytes(60)  # inside the first member's compressed stream
    deflated.write_bytes(bytes(data))
    with pytest.raises(MotionFileError, match=r"deflated\.npz: key '\w+'"):
        load_motions(deflated, model)
    complex_clip = _save(tmp_path / "complex.npz", {**raw, "joint_pos": raw["joint_pos"].astype(np.complex64)})
    with pytest.raises(MotionFileError, match=r"'joint_pos' must hold real numbers, got dtype complex64"):
        load_motions(complex_clip, model)


def test_shipped_clip_is_reproducible(model: mujoco.MjModel, raw: dict[str, np.ndarray]) -> None:
    """Rerunning the documented procedure gives the shipped arrays (to float32 rounding)."""
    regenerated = generate_reference_clip(model)
    for key in TENSOR_KEYS:
        np.testing.assert_allclose(raw[key], regenerated[key], atol=1e-5, rtol=1e-6, err_msg=key)
    assert raw["joint_names"].tolist() == list(JOINT_NAMES)
    assert raw["body_names"].tolist() == list(BODY_NAMES)
    assert float(raw["fps"]) == 50.0


def test_full_state_file_without_joint_names_is_refused(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]
) -> None:
    arrays = _format_b(raw, include_world=False)
    del arrays["joint_names"]
    with pytest.raises(MotionFileError, match=r"'joint_names' is missing; a full-state joint_pos"):
        load_motions(_save(tmp_path / "nameless.npz", arrays), model)


def test_arrays_the_loader_does_not_use_are_never_decompressed(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray]
) -> None:
    """Reading an object array needs pickle, so the load only succeeds if that array is never touched."""
    extra = {"retargeting_notes": np.array([{"tool": "x"}], dtype=object)}
    loaded = load_motions(_save(tmp_path / "extra.npz", {**raw, **extra}), model)
    assert loaded.num_frames == FRAMES


def test_resampling_past_the_frame_bound_is_refused_before_it_allocates(
    tmp_path: Path, model: mujoco.MjModel, raw: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    from unilab.motion import loader

    monkeypatch.setattr(loader, "MAX_FRAMES", 1000)
    resampled = []
    monkeypatch.setattr(loader, "_resample", lambda *args: resampled.append(args))
    slow = {**raw, "fps": np.array(10.0)}  # 50 s at 10 fps: 2501 frames at the control rate
    with pytest.raises(MotionFileError, match=r"501 frames at 10 fps would be 2501 frames at 50 Hz.*at most 1000"):
        load_motions(_save(tmp_path / "slow.npz", slow), model)
    assert not resampled
