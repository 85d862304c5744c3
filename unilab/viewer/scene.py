"""The robot scene in viser, built from an ``MjModel``: one node per geom, under one frame per body.

Geoms keep their pose in their body's frame, so a frame needs only its body's world pose, ``data.xpos`` and
``data.xquat``, to move every geom on it: each displayed frame costs one update per body, not one per geom.
Geoms on the world body (the floor, a terrain's height field) are drawn once and never move.

Shown geoms are the groups MuJoCo's own viewer shows plus group 3, where the G1 keeps the collision shapes that are
its only visible shape (as ``unilab play`` does). They are drawn opaque: the model colours them translucent so that
they do not hide a visual mesh, and the G1 has none.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import viser

from unilab.viewer import geometry

SHOWN_GROUPS = (0, 1, 2, 3)
INFINITE_PLANE_HALF = 10.0  # metres drawn of a plane MuJoCo makes infinite (size 0)
SPACING = 1.5  # metres between robots drawn side by side on a flat floor
FLOOR_RGB = (150, 150, 150)
# Where a new page looks from, relative to what it looks at: from the front right and a little above.
CAMERA_DIRECTION = np.array([1.0, -1.0, 0.57]) / np.linalg.norm([1.0, -1.0, 0.57])
# The share of the view's height that the robots' largest dimension spans on a new page. A fixed camera position
# framed the G1 at a sixth of the page and the Go1, a third of its size, as a speck; the distance follows the
# robots' size instead.
FILL = 0.4
G = mujoco.mjtGeom


def geom_rgb(model: mujoco.MjModel, geom: int) -> tuple[int, int, int]:
    """The colour MuJoCo draws a geom in: its material's where it has one, else its own."""
    if geom >= 0 and model.geom_bodyid[geom] == 0 and model.geom_type[geom] in (G.mjGEOM_PLANE, G.mjGEOM_HFIELD):
        return FLOOR_RGB  # a textured floor's material colour is the texture's tint, often white
    matid = model.geom_matid[geom]
    rgba = model.mat_rgba[matid] if matid >= 0 else model.geom_rgba[geom]
    red, green, blue = (round(255 * float(c)) for c in rgba[:3])
    return red, green, blue


def shown_geoms(model: mujoco.MjModel, body: int) -> list[int]:
    """The geoms of ``body`` a viewer draws: shown groups, not fully transparent, of a shape it can draw."""
    ids = np.flatnonzero(model.geom_bodyid == body)
    return [
        int(g)
        for g in ids
        if model.geom_group[g] in SHOWN_GROUPS and model.geom_rgba[g, 3] > 0 and model.geom_type[g] != G.mjGEOM_SDF
    ]


def add_geom(scene: viser.SceneApi, name: str, model: mujoco.MjModel, geom: int) -> viser.SceneNodeHandle:
    """One geom as a viser node at its pose in its parent frame (``name``'s parent)."""
    kind, size, rgb = model.geom_type[geom], model.geom_size[geom], geom_rgb(model, geom)
    pose = {"position": model.geom_pos[geom].copy(), "wxyz": model.geom_quat[geom].copy()}
    if kind == G.mjGEOM_BOX:
        return scene.add_box(name, rgb, dimensions=2 * size, **pose)
    if kind == G.mjGEOM_SPHERE:
        return scene.add_icosphere(name, float(size[0]), rgb, **pose)
    if kind == G.mjGEOM_ELLIPSOID:
        return scene.add_icosphere(name, 1.0, rgb, scale=tuple(float(s) for s in size), **pose)
    if kind == G.mjGEOM_CYLINDER:
        vertices, faces = geometry.cylinder(float(size[0]), float(size[1]))
    elif kind == G.mjGEOM_CAPSULE:
        vertices, faces = geometry.capsule(float(size[0]), float(size[1]))
    elif kind == G.mjGEOM_PLANE:
        half = [float(s) if s > 0 else INFINITE_PLANE_HALF for s in size[:2]]
        vertices, faces = geometry.plane(*half)
    elif kind == G.mjGEOM_HFIELD:
        field = model.geom_dataid[geom]
        rows, cols, start = model.hfield_nrow[field], model.hfield_ncol[field], model.hfield_adr[field]
        elevation = model.hfield_data[start : start + rows * cols].reshape(rows, cols)
        vertices, faces = geometry.height_field(model.hfield_size[field], elevation)
    elif kind == G.mjGEOM_MESH:
        mesh = model.geom_dataid[geom]
        v0, nv = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
        f0, nf = model.mesh_faceadr[mesh], model.mesh_facenum[mesh]
        vertices, faces = model.mesh_vert[v0 : v0 + nv], model.mesh_face[f0 : f0 + nf]
    else:
        raise ValueError(f"geom {geom} has type {kind}, which the viewer cannot draw")
    return scene.add_mesh_simple(name, vertices, faces, color=rgb, **pose)


def robots_size(model: mujoco.MjModel, datas: Sequence[mujoco.MjData], offsets: np.ndarray) -> float:
    """The largest dimension (m) of the box around the robots whose kinematics ``datas`` hold, drawn at ``offsets``
    (robots, 3): the bounding spheres of every geom off the world body."""
    moving = model.geom_bodyid > 0
    centres = np.concatenate([data.geom_xpos[moving] + offset for data, offset in zip(datas, offsets, strict=True)])
    reach = np.tile(model.geom_rbound[moving, None], (len(datas), 1))
    low, high = (centres - reach).min(axis=0), (centres + reach).max(axis=0)
    return float((high - low).max())


def camera_offset(size: float, fov: float) -> np.ndarray:
    """Where a camera of vertical field of view ``fov`` (radians) stands, from what it looks at, to see ``size``
    metres as ``FILL`` of its view."""
    return CAMERA_DIRECTION * size / (2 * FILL * np.tan(fov / 2))


def _body_name(model: mujoco.MjModel, body: int) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, body) or f"body{body}"


class RobotScene:
    """``num_robots`` copies of the model's moving bodies in ``server``'s scene, and the world's geoms once.

    ``show`` takes the joint positions of each robot and moves the body frames; forward kinematics runs here, on
    the CPU, in one ``MjData`` per robot, so any backend (or a copy taken from a training run) can feed it.
    """

    def __init__(self, server: viser.ViserServer, model: mujoco.MjModel, num_robots: int) -> None:
        if num_robots < 1:
            raise ValueError(f"num_robots must be >= 1, got {num_robots}")
        self.server, self.model = server, model
        self.datas = [mujoco.MjData(model) for _ in range(num_robots)]
        scene = server.scene
        scene.set_up_direction("+z")
        for geom in shown_geoms(model, 0):
            add_geom(scene, f"/world/geom{geom}", model, geom)
        # Robots stand side by side on a flat floor; on a terrain each world has its own place on it already.
        flat = not np.any(model.geom_type == G.mjGEOM_HFIELD)
        self._framed = num_robots if flat else 1  # on a terrain the first robot, alone on its tile
        self._aim = True  # again at the first ``show``: the robots stand where their env put them
        self.offsets = np.zeros((num_robots, 3))
        if flat:
            self.offsets[:, 1] = SPACING * (np.arange(num_robots) - (num_robots - 1) / 2)
        self.bodies = [b for b in range(1, model.nbody) if shown_geoms(model, b)]
        for data in self.datas:  # the initial pose, framed until the first ``show`` says where the robots are
            mujoco.mj_kinematics(model, data)
        self._aim_camera()
        self.frames: list[list[viser.FrameHandle]] = []
        for robot in range(num_robots):
            frames = []
            for body in self.bodies:
                path = f"/robot{robot}/{_body_name(model, body)}"
                frames.append(scene.add_frame(path, show_axes=False))
                for geom in shown_geoms(model, body):
                    add_geom(scene, f"{path}/geom{geom}", model, geom)
            self.frames.append(frames)

    @property
    def num_robots(self) -> int:
        return len(self.datas)

    def poses(self, qpos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World positions (robots, bodies, 3) and orientations (robots, bodies, 4) of the drawn bodies for joint
        positions ``qpos`` (robots, nq), the floor offsets included."""
        positions = np.empty((self.num_robots, len(self.bodies), 3))
        quats = np.empty((self.num_robots, len(self.bodies), 4))
        for robot, data in enumerate(self.datas):
            data.qpos[:] = qpos[robot]
            mujoco.mj_kinematics(self.model, data)
            positions[robot] = data.xpos[self.bodies] + self.offsets[robot]
            quats[robot] = data.xquat[self.bodies]
        return positions, quats

    def show(self, qpos: np.ndarray | Sequence[np.ndarray]) -> None:
        """Move every drawn body to where ``qpos`` (one row per robot) puts it; one message batch per call."""
        positions, quats = self.poses(np.asarray(qpos, dtype=np.float64))
        with self.server.atomic():
            for robot, frames in enumerate(self.frames):
                for i, frame in enumerate(frames):
                    frame.position = positions[robot, i]
                    frame.wxyz = quats[robot, i]
        if self._aim:
            self._aim = False
            self._aim_camera()

    def _aim_camera(self) -> None:
        """Point new pages at the framed robots' base (their mean) as the ``datas`` last placed them, from a
        distance at which they fill ``FILL`` of the view."""
        camera, framed = self.server.initial_camera, slice(self._framed)
        datas, offsets = self.datas[framed], self.offsets[framed]
        size = robots_size(self.model, datas, offsets)
        target = np.mean([data.xpos[self.bodies[0]] for data in datas], axis=0) + offsets.mean(axis=0)
        camera.look_at = tuple(target)
        camera.position = tuple(target + camera_offset(size, camera.fov))
