"""Reward terms: ``(state, ctx, **params) -> (N,)``; weights and dt live in the task config."""

from __future__ import annotations

import torch

from unilab.context import EnvContext, State
from unilab.mdp.observations import sensor
from unilab.mdp.terrain import bodies_height, ground_normal, height_above_ground
from unilab.terrain.heightmap import HeightMap


def alive(state: State, ctx: EnvContext) -> torch.Tensor:
    return torch.ones(ctx.num_envs, device=ctx.device)


def track_lin_vel_xy_exp(
    state: State, ctx: EnvContext, command: str, velocity_sensor: str, sigma: float
) -> torch.Tensor:
    """exp(-|c_xy - v_xy|^2 / sigma) with v the body-frame velocity sensor (sigma not squared)."""
    error = (state["env", command][:, :2] - sensor(state, ctx, velocity_sensor)[:, :2]).square().sum(-1)
    return torch.exp(-error / sigma)


def track_ang_vel_z_exp(state: State, ctx: EnvContext, command: str, gyro: str, sigma: float) -> torch.Tensor:
    error = (state["env", command][:, 2] - sensor(state, ctx, gyro)[:, 2]).square()
    return torch.exp(-error / sigma)


def ang_vel_xy_l2(state: State, ctx: EnvContext, gyro: str) -> torch.Tensor:
    return sensor(state, ctx, gyro)[:, :2].square().sum(-1)


def upvector_xy_l2(state: State, ctx: EnvContext, upvector: str) -> torch.Tensor:
    """Tilt penalty: x^2 + y^2 of a body z-axis in world (0 when upright)."""
    return sensor(state, ctx, upvector)[:, :2].square().sum(-1)


def upvector_from_ground_l2(
    state: State, ctx: EnvContext, upvector: str, body: str, ground: HeightMap, span: float
) -> torch.Tensor:
    """Tilt penalty against the ground: 1 - (u . n)^2, the squared sine of the angle between a body's z-axis u in
    world and the normal n of the ground under ``body`` (``ground_normal`` over ``span``); on level ground it is
    ``upvector_xy_l2``. A quadruped on a flight of stairs stands with its trunk along the flight, its feet a step or
    two apart; held level instead, its front legs fold and its knees, hips and head meet the steps."""
    up = sensor(state, ctx, upvector)
    normal = ground_normal(ground, state["sim", "xpos"][:, ctx.body_ids[body], :2], span)
    return 1.0 - (up * normal).sum(-1).square()


def action_rate_l2(state: State, ctx: EnvContext) -> torch.Tensor:
    return (state["env", "action"] - state["env", "prev_action"]).square().sum(-1)


def joint_pose_weighted_l2(state: State, ctx: EnvContext, weights: torch.Tensor) -> torch.Tensor:
    return ((state["sim", "qpos"][:, ctx.joint_qpos] - ctx.default_joint_pos).square() * weights).sum(-1)


def quat_xy_l2(state: State, ctx: EnvContext, quat_sensors: tuple[str, ...]) -> torch.Tensor:
    """Sum over sensors of qx^2 + qy^2 of a world frame quaternion (0 when only yawed)."""
    return sum(sensor(state, ctx, name)[:, 1:3].square().sum(-1) for name in quat_sensors)


def swing_height_target(phase: torch.Tensor, swing_height: float) -> torch.Tensor:
    """Foot height target over a gait cycle: 0 at phase pi, ``swing_height`` at phase 0.

    A smoothstep B(t) = 3t^2 - 2t^3 rises over the first half of x = (phase/2pi + 0.5) mod 1
    and falls over the second.
    """
    x = torch.remainder(phase / (2 * torch.pi) + 0.5, 1.0)

    def smoothstep(t: torch.Tensor) -> torch.Tensor:
        return t * t * (3.0 - 2.0 * t)

    rising = smoothstep(2.0 * x)
    falling = 1.0 - smoothstep(2.0 * x - 1.0)
    return swing_height * torch.where(x <= 0.5, rising, falling)


def feet_phase_height_exp(
    state: State,
    ctx: EnvContext,
    phase: str,
    foot_pos_sensors: tuple[str, ...],
    swing_height: float,
    sigma: float,
    ground: HeightMap | None = None,
    around: torch.Tensor | None = None,
) -> torch.Tensor:
    """exp(-sum_feet (z_foot - h(phase))^2 / sigma): feet follow the gait clock's height profile, measured from
    z = 0, or on a terrain from the highest surface within the ``around`` offsets (``footprint``) of each foot, so a
    swing clears a step as it clears flat ground and lifts before the toe meets the riser."""
    target = swing_height_target(state["env", phase], swing_height)
    z = feet_heights(state, ctx, foot_pos_sensors, ground, around)
    return torch.exp(-(z - target).square().sum(-1) / sigma)


def feet_heights(
    state: State,
    ctx: EnvContext,
    foot_pos_sensors: tuple[str, ...],
    ground: HeightMap | None,
    around: torch.Tensor | None,
) -> torch.Tensor:
    """(N, feet): each foot site's height above z = 0, or on a terrain above the highest surface within the
    ``around`` offsets of it (``height_above_ground``), as the foot rewards measure it."""
    feet = torch.stack([sensor(state, ctx, name) for name in foot_pos_sensors], dim=1)
    return feet[..., 2] if ground is None else height_above_ground(ground, feet, around)


def feet_clearance_by_speed(
    state: State,
    ctx: EnvContext,
    command: str,
    foot_pos_sensors: tuple[str, ...],
    foot_linvel_sensors: tuple[str, ...],
    target_height: float,
    deadzone: float,
    ground: HeightMap | None = None,
    around: torch.Tensor | None = None,
) -> torch.Tensor:
    """sum_feet |h_foot - target_height| * |v_foot_xy|, while the command asks for motion (its planar speed plus
    its yaw rate above ``deadzone``), else 0.

    A foot may move fast only at the swing's height: one that sweeps forward low catches a step's riser with its
    toe, and one that slides while it stands slips. ``h_foot`` counts from z = 0, or on a terrain from the highest
    surface within the ``around`` offsets (``footprint``) of the foot, so the height a foot must hold over a step
    is measured from the step's top before its toe reaches the riser. A robot asked to stand still may shuffle its
    feet into place at any height."""
    height = feet_heights(state, ctx, foot_pos_sensors, ground, around)
    velocity = torch.stack([sensor(state, ctx, name)[:, :2] for name in foot_linvel_sensors], dim=1)
    cost = ((height - target_height).abs() * torch.linalg.vector_norm(velocity, dim=-1)).sum(-1)
    asked = state["env", command]
    moving = torch.linalg.vector_norm(asked[:, :2], dim=-1) + asked[:, 2].abs() > deadzone
    return torch.where(moving, cost, 0.0)


def feet_stumble(state: State, ctx: EnvContext, force_sensors: tuple[str, ...], ratio: float) -> torch.Tensor:
    """How many feet (N,) the ground pushes more than ``ratio`` times as hard sideways as up or down: a foot that
    struck a step's riser, or slides into one, rather than one standing on a tread (legged_gym's stumble, with its
    ratio of 5). ``force_sensors`` read each foot's net contact force with the ground in the world frame
    (``unilab.sim.contact_sensors.add_ground_force_sensors``); a foot in the air reads zero and counts for nothing."""
    force = torch.stack([sensor(state, ctx, name)[:, :3] for name in force_sensors], dim=1)
    sideways = torch.linalg.vector_norm(force[..., :2], dim=-1)
    return (sideways > ratio * force[..., 2].abs()).sum(-1).to(force.dtype)


def bodies_clearance_deficit(
    state: State, ctx: EnvContext, bodies: tuple[str, ...], margin: float, ground: HeightMap | None = None
) -> torch.Tensor:
    """How far (N,) ``bodies``' origins come within ``margin`` of the ground under them (of z = 0 without a
    terrain), in units of ``margin`` and summed over the bodies: 0 at ``margin`` or higher, 1 for each on the ground.
    A graded warning before a rule that ends the episode nearer the ground, so that a policy is paid to keep those
    parts up before they end it, not only when they do."""
    return ((margin - bodies_height(state, ctx, bodies, ground)).clamp(min=0.0) / margin).sum(-1)
