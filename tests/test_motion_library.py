"""Motion libraries: several clips from files or a directory, checked per clip and as a whole, sampled adaptively
over clips and within them, and played by the tracking env with the clip id in its state.

The clips are synthesised here from the shipped one (slices, shifted in x), never shipped.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch

from unilab.context import apply_updates
from unilab.core.rng import advance, make_rng
from unilab.motion import DEFAULT_MOTION, MotionFileError, load_motions, motion_files
from unilab.motion import loader as motion_loader
from unilab.tasks.g1_motion_tracking import terms as tracking
from unilab.tasks.registry import make_functional_env, make_task

SLICES = {"a_squat_start": (0, 61, 0.0), "b_squat_middle": (200, 301, 1.5), "c_arms": (350, 391, -0.7)}
"""Clip name -> (first frame, end frame, x shift in m) of the shipped clip: three lengths, three places."""


def write_clip(path: Path, first: int, end: int, shift_x: float = 0.0) -> Path:
    """Frames ``first:end`` of the shipped clip, every body moved ``shift_x`` along x (the world body stays)."""
    with np.load(DEFAULT_MOTION) as archive:
        arrays = {key: archive[key] for key in archive.files}
    for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        arrays[key] = arrays[key][first:end].copy()
    arrays["body_pos_w"][:, 1:, 0] += shift_x
    np.savez(path, **arrays)
    return path


def write_library(directory: Path, slices: dict[str, tuple[int, int, float]] = SLICES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, (first, end, shift) in slices.items():
        write_clip(directory / f"{name}.npz", first, end, shift)
    return directory


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_library(tmp_path_factory.mktemp("library") / "clips")


@pytest.fixture(scope="module")
def shipped(model: mujoco.MjModel):
    return load_motions(DEFAULT_MOTION, model)


# --- files and the loader ------------------------------------------------------------------------


def test_a_directory_is_its_clips_in_name_order(library: Path, model: mujoco.MjModel, shipped) -> None:
    clips = load_motions(library, model)
    lengths = [end - first for first, end, _ in SLICES.values()]
    assert clips.clip_names == sorted(SLICES)
    assert clips.clip_lengths.tolist() == lengths
    assert clips.clip_starts.tolist() == [0, lengths[0], lengths[0] + lengths[1]]
    for c, (first, end, shift) in enumerate(SLICES.values()):
        rows = slice(int(clips.clip_starts[c]), int(clips.clip_starts[c] + clips.clip_lengths[c]))
        assert torch.equal(clips.joint_pos[rows], shipped.joint_pos[first:end])
        moved = shipped.body_pos_w[first:end].clone()
        moved[:, 1:, 0] += shift
        torch.testing.assert_close(clips.body_pos_w[rows], moved, atol=1e-6, rtol=0)


def test_a_list_mixes_files_and_directories_in_the_order_given(library: Path, tmp_path: Path) -> None:
    extra = write_clip(tmp_path / "z_extra.npz", 10, 30)
    files = motion_files([extra, library, DEFAULT_MOTION])
    assert [f.stem for f in files] == ["z_extra", *sorted(SLICES), "g1_reference_sway"]
    assert motion_files(str(DEFAULT_MOTION)) == [DEFAULT_MOTION]


def test_specs_that_name_no_clip_or_ambiguous_clips_are_refused(library: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"holds no \.npz clip"):
        motion_files(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="motion file not found"):
        motion_files([library, tmp_path / "absent.npz"])
    with pytest.raises(MotionFileError, match="no motion file given"):
        motion_files([])
    with pytest.raises(MotionFileError, match="empty motion file path"):
        motion_files("")
    twin = write_clip(tmp_path / "a_squat_start.npz", 0, 20)
    with pytest.raises(MotionFileError, match=r"\['a_squat_start'\] appear more than once"):
        motion_files([library, twin])


def test_every_clip_of_a_library_is_checked_and_named(library: Path, tmp_path: Path, model: mujoco.MjModel) -> None:
    bad = write_clip(tmp_path / "bad.npz", 0, 50)
    with np.load(bad) as archive:
        arrays = {key: archive[key] for key in archive.files}
    np.savez(bad, **{**arrays, "joint_pos": arrays["joint_pos"] * 100.0})
    with pytest.raises(MotionFileError, match=r"bad\.npz: joint '\w+' is at .* outside its limits"):
        load_motions([library, bad], model)
    slow = write_clip(tmp_path / "slow.npz", 0, 50)
    np.savez(slow, **{**arrays, "fps": np.array(0.5)})
    with pytest.raises(MotionFileError, match=r"slow\.npz: key 'fps'"):
        load_motions([library, slow], model)


def test_a_library_over_the_total_budget_is_refused_before_any_clip_is_read(
    library: Path, model: mujoco.MjModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(motion_loader, "MAX_TOTAL_FRAMES", 150)  # each clip fits, all three (203 frames) do not
    read = []
    monkeypatch.setattr(motion_loader, "_load_clip", lambda *args: read.append(args))
    pattern = r"3 motion files hold 203 frames at 50 Hz, about 0\.0 GiB .* at most 150 frames .* b_squat_middle.npz"
    with pytest.raises(MotionFileError, match=pattern):
        load_motions(library, model)
    assert not read
    # The estimate is the float32 size of what goes to the device: 58 joint and 31 * 13 body floats a frame.
    assert motion_loader._library_bytes(202, motion_loader._RobotLayout.from_model(model)) == 202 * 4 * (58 + 403)


# --- sampling over clips and within them ---------------------------------------------------------


LENGTHS = torch.tensor([101, 501, 41])
BINS = torch.tensor([3, 11, 1])
STARTS = torch.tensor([0, 101, 602])


def _draws(n: int = 20_000, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 2, generator=torch.Generator().manual_seed(seed))


def test_uniform_sampling_spreads_over_every_clips_seconds() -> None:
    frames = tracking.sample_frames(torch.zeros(int(BINS.sum())), _draws(), LENGTHS, 0.1, BINS)
    clip = torch.searchsorted(STARTS, frames, right=True) - 1
    assert frames.min() >= 0 and frames.max() < int(LENGTHS.sum())
    shares = torch.bincount(clip, minlength=3).float() / len(frames)
    torch.testing.assert_close(shares, BINS.float() / BINS.sum(), atol=0.02, rtol=0)  # by bins: about by duration
    for c in range(3):  # each clip's frames, first to last, all reachable
        local = frames[clip == c] - STARTS[c]
        assert local.min() <= 2 and local.max() >= LENGTHS[c] - 3


def test_failures_draw_starts_to_their_clip_and_bin() -> None:
    motion = _fake_motion()
    ema = torch.zeros(int(BINS.sum()))
    ema[3 + 7] = 1.0  # clip 1, its eighth second
    frames = tracking.sample_frames(ema, _draws(), LENGTHS, 0.0, BINS)
    clip = tracking.clip_of(motion, frames)
    assert (clip == 1).all()
    bins = tracking.frame_bin(motion, BINS, clip, frames)
    assert ((bins == 10) | (bins == 9)).all() and (bins == 10).float().mean() > 0.95  # 9: the bin's first frame
    ema[14] = 1.0  # clip 2's only bin fails as often: half the starts go there
    frames = tracking.sample_frames(ema, _draws(), LENGTHS, 0.0, BINS)
    assert (tracking.clip_of(motion, frames) == 2).float().mean().item() == pytest.approx(0.5, abs=0.02)


def test_a_failure_also_draws_starts_to_the_seconds_before_it_in_its_own_clip() -> None:
    motion = _fake_motion()
    ema = torch.zeros(int(BINS.sum()))
    ema[3 + 1] = 1.0  # clip 1, its second second; clip 0's bins come just before it
    frames = tracking.sample_frames(ema, _draws(), LENGTHS, 0.0, BINS, look_back_bins=3)
    clip = tracking.clip_of(motion, frames)
    assert (clip == 1).all()  # clip 0's last seconds borrow nothing from the next clip
    bins = tracking.frame_bin(motion, BINS, clip, frames)
    decay = tracking.LOOK_BACK_DECAY  # the failing bin weighs 1, the one before it decay (two bins back: none left)
    assert (bins <= 4).all() and (bins == 3).float().mean().item() == pytest.approx(decay / (1 + decay), abs=0.02)
    ema[:] = 0.0
    ema[2] = 1.0  # clip 0's last second: past a clip's end its last bin stands in for the bins beyond
    weights = tracking.look_back(ema, torch.cumsum(BINS, 0), 3)
    total = 1 + decay + decay**2
    expected = torch.zeros_like(ema)
    expected[:3] = torch.tensor([decay**2 / total, (decay + decay**2) / total, 1.0])
    torch.testing.assert_close(weights, expected)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="failure_look_back must be an integer >= 1"):
            make_task("g1_motion_tracking", failure_look_back=bad)


def test_a_single_clip_samples_the_start_frames_it_always_did() -> None:
    """Values recorded from the sampler before motion libraries existed: one clip keeps every seed's results. The
    resets' values were taken again when the counter RNG came to carry its key and when a draw came to offset its
    index by the key, each of which changed every draw (with the RNG before them, the library still gave the values
    recorded before libraries)."""
    ema = torch.zeros(11)
    ema[3], ema[9] = 0.5, 0.2
    u = torch.rand(12, 2, generator=torch.Generator().manual_seed(3))
    frames = tracking.sample_frames(ema, u, 501, 0.1)
    assert frames.tolist() == [4, 137, 139, 442, 176, 172, 154, 157, 179, 448, 146, 409]
    env = make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=8)
    assert env.reset(make_rng(0))["env", "motion"][:, 0].long().tolist() == [491, 157, 235, 208, 332, 361, 27, 261]
    assert env.reset(make_rng(1))["env", "motion"][:, 0].long().tolist() == [466, 428, 53, 418, 141, 129, 64, 77]


def _fake_motion() -> SimpleNamespace:
    """Just the clip layout ``clip_of`` and ``frame_bin`` read."""
    return SimpleNamespace(clip_starts=STARTS, clip_lengths=LENGTHS)


# --- the tracking env on a library ---------------------------------------------------------------

N = 6


@pytest.fixture(scope="module")
def env(library: Path):
    return make_functional_env(
        "g1_motion_tracking", sim="mujoco", num_envs=N, obs_noise=False, reset_noise_scale=0.0, motion_file=library
    )


def _motion(env):
    return env.task.events["reset_to_reference"].params["motion"]


def test_reset_puts_each_env_on_a_frame_of_the_clip_it_records(env) -> None:
    motion = _motion(env)
    assert env.task.curricula["adaptive_sampling"].state[tracking.FAIL_EMA_KEY].shape == (2 + 3 + 1,)
    for seed in range(3):
        state = env.reset(make_rng(seed))
        clip = tracking.clip_index(state)
        frame, last = state["env", "motion"][:, 0].long(), state["env", "motion"][:, 1].long()
        assert torch.equal(tracking.clip_of(motion, frame), clip)
        assert torch.equal(last, motion.clip_starts[clip] + motion.clip_lengths[clip] - 1)
        assert (frame >= motion.clip_starts[clip]).all() and (frame <= last).all()
        # the robot stands on its own clip's frame, shifted place included
        torch.testing.assert_close(state["sim", "qpos"][:, :3], motion.body_pos_w[frame, 1], atol=1e-5, rtol=0)


def test_a_clip_ends_on_its_own_last_frame_not_the_next_clips_first(env) -> None:
    motion = _motion(env)
    rng = make_rng(4)
    state = env.reset(rng)
    clip = torch.arange(N) % 3
    frame = motion.clip_starts[clip] + motion.clip_lengths[clip] - 2  # one step before each clip's end
    pointer = torch.stack((frame, frame + 1), dim=-1).float()
    state = apply_updates(state, {("env", "motion"): pointer, ("env", tracking.CLIP_KEY): clip.float()})
    _, transition = env.step(state, torch.zeros(N, 29), advance(rng))
    assert transition["next", "truncated"].all() and not transition["next", "terminated"].any()


def test_failures_count_in_their_clips_bins(env) -> None:
    motion = _motion(env)
    state = env.reset(make_rng(5))
    clip = torch.tensor([0, 1, 2, 1, 0, 2])
    frame = motion.clip_starts[clip] + torch.tensor([10, 60, 5, 99, 59, 39])
    ref = tracking.reference_root_state(motion, frame, torch.zeros(N, 41))
    ref["qpos"][1, 2] -= 0.6  # env 1 (clip 1, its frame 60 of 101: bin 1 of 3) falls
    physics = {name: value.clone() for name, value in state["sim"].items()}
    env.sim.reset_(physics, torch.ones(N, dtype=torch.bool), ref["qpos"], ref["qvel"])
    updates = {("sim", name): value for name, value in physics.items()}
    pointer = torch.stack((frame, tracking.clip_last_frame(motion, frame)), dim=-1).float()
    state = apply_updates(state, {**updates, ("env", "motion"): pointer, ("env", tracking.CLIP_KEY): clip.float()})
    terminated, _ = env.terminations.compute(state, env.ctx)
    assert terminated.tolist() == [False, True, False, False, False, False]
    update = tracking.failure_ema(
        state, env.ctx, terminated, terminated, **env.task.curricula["adaptive_sampling"].params
    )
    expected = torch.zeros(6)
    expected[2 + 1] = 0.001  # clip 0 owns bins 0-1, clip 1 bins 2-4
    torch.testing.assert_close(update[("task", tracking.FAIL_EMA_KEY)], expected)


def test_first_frame_starts_spread_the_envs_over_the_clips(library: Path) -> None:
    env = make_functional_env(
        "g1_motion_tracking", sim="mujoco", num_envs=N, obs_noise=False, motion_file=library, start="first_frame"
    )
    motion = _motion(env)
    state = env.reset(make_rng(0))
    clip = torch.arange(N) % 3
    assert torch.equal(tracking.clip_index(state), clip)
    assert torch.equal(state["env", "motion"][:, 0].long(), motion.clip_starts[clip])
    longest = int(motion.clip_lengths.max())
    assert env.ctx.max_episode_steps == longest - 1  # long enough to play the longest clip through
    with pytest.raises(ValueError, match="start must be one of adaptive, first_frame"):
        make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=1, start="middle")


@pytest.mark.slow
@pytest.mark.parametrize(("start", "look_back"), [("adaptive", 1), ("adaptive", 3), ("first_frame", 1)])
def test_a_library_step_traces_fullgraph(library: Path, start: str, look_back: int) -> None:
    """Clip lookups, per clip-bin sampling (with and without look-back) and both starts without a host sync: a
    graph break fails fullgraph."""
    env = make_functional_env(
        "g1_motion_tracking", sim="mujoco", num_envs=3, motion_file=library, start=start, failure_look_back=look_back
    )
    action = torch.rand(3, 29, generator=torch.Generator().manual_seed(0)) * 2 - 1
    rng = make_rng(0)
    state = apply_updates(env.reset(rng), {("env", "episode_step"): torch.full((3,), env.ctx.max_episode_steps)})
    compiled = torch.compile(env.step, fullgraph=True, backend="aot_eager")
    state_c, trans_c = compiled(state, action, advance(rng))  # every env times out: the reset runs in the graph
    state_e, trans_e = env.step(state, action, advance(rng))
    assert trans_e["next", "truncated"].all()
    torch.testing.assert_close(state_c["env", "motion"], state_e["env", "motion"])
    torch.testing.assert_close(state_c["env", tracking.CLIP_KEY], state_e["env", tracking.CLIP_KEY])
    torch.testing.assert_close(trans_c["next", "reward"], trans_e["next", "reward"])
