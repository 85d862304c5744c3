"""A robot's model against its config, when the env is built: everything the config names is in the model, the
counts that must agree do, and the model is of a size a batch of envs can hold.

Without these checks a model that does not fit its config builds and then fails at the first step, in a tensor-size
error that never says which part of the model is missing; and MuJoCo's MJCF parser takes time that grows with the
square of the element count (about a minute for 40,000 bodies), so a huge model is refused by a count of its XML
before MuJoCo reads it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

import mujoco

from unilab.context import RobotConfig

# What a model may hold: far above any legged robot on any shipped terrain (the G1 on rough ground has 31 bodies,
# 137 geoms and 35 DoF), far below what takes MuJoCo minutes to read or a batch of envs gigabytes to hold.
MAX_BODIES = 1000
MAX_GEOMS = 20000
MAX_DOF = 1000
_XML_LIMITS = {"body": MAX_BODIES, "geom": MAX_GEOMS, "joint": MAX_DOF}
_JOINT_TRANSMISSION = int(mujoco.mjtTrn.mjTRN_JOINT)


class ModelMismatchError(ValueError):
    """A robot's model does not fit its config, or is too large: one line naming what and where."""


def _xml_counts(path: Path, root_dir: Path, seen: set[Path]) -> Counter[str]:
    """Bodies, geoms and joints an MJCF file declares, its includes (relative to the top file's directory, as
    MuJoCo reads them) and replicated blocks counted in."""
    if path in seen or not path.is_file():  # MuJoCo itself names a missing or repeated include
        return Counter()
    seen.add(path)
    try:
        tree = ElementTree.parse(path)
    except ElementTree.ParseError as exc:
        raise ModelMismatchError(f"{path} is not well-formed XML: {exc}") from None
    return _element_counts(tree.getroot(), root_dir, seen)


def _element_counts(element: ElementTree.Element, root_dir: Path, seen: set[Path]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for child in element:
        if child.tag == "include" and child.get("file"):
            counts += _xml_counts((root_dir / child.get("file", "")).resolve(), root_dir, seen)
            continue
        inner = _element_counts(child, root_dir, seen)
        if child.tag in ("joint", "freejoint"):
            inner["joint"] += 6 if child.tag == "freejoint" or child.get("type") == "free" else 1
        elif child.tag in ("body", "geom"):
            inner[child.tag] += 1
        times = _replicas(child)
        counts.update({tag: count * times for tag, count in inner.items()})
    return counts


def _replicas(element: ElementTree.Element) -> int:
    """How many times MuJoCo repeats ``element``'s children: a ``replicate``'s count, else once."""
    if element.tag != "replicate":
        return 1
    try:
        return max(int(element.get("count", "1")), 1)
    except ValueError:
        return 1  # MuJoCo refuses the count itself


def check_scene_size(scene: Path) -> None:
    """Refuse an MJCF scene declaring more bodies, geoms or joint DoF than a model may hold, before MuJoCo parses
    it."""
    scene = Path(scene).resolve()
    counts = _xml_counts(scene, scene.parent, set())
    for tag, limit in _XML_LIMITS.items():
        if counts[tag] > limit:
            what = "joint DoF" if tag == "joint" else f"{tag.replace('body', 'bodie')}s"
            raise ModelMismatchError(f"{scene} declares {counts[tag]} {what}; a model may hold at most {limit}")


def check_model_size(model: mujoco.MjModel, where: str) -> None:
    """Refuse a compiled model (a generated terrain included) beyond the bounds on bodies, geoms and DoF."""
    for what, count, limit in (("bodies", model.nbody, MAX_BODIES), ("geoms", model.ngeom, MAX_GEOMS)):
        if count > limit:
            raise ModelMismatchError(f"{where} has {count} {what}; a model may hold at most {limit}")
    if model.nv > MAX_DOF:
        raise ModelMismatchError(f"{where} has {model.nv} DoF; a model may hold at most {MAX_DOF}")


def _missing(model: mujoco.MjModel, kind: mujoco.mjtObj, names: list[str]) -> list[str]:
    return [name for name in names if mujoco.mj_name2id(model, kind, name) < 0]


def check_names(model: mujoco.MjModel, robot: RobotConfig, where: str) -> None:
    """Every joint, body, site, sensor and keyframe ``robot`` names is in ``model``."""
    named = {
        "joint": (mujoco.mjtObj.mjOBJ_JOINT, list(robot.joint_names)),
        "body": (
            mujoco.mjtObj.mjOBJ_BODY,
            [robot.base_body, robot.torso_body, *([robot.payload_body] if robot.payload_body else [])],
        ),
        "site": (mujoco.mjtObj.mjOBJ_SITE, list(robot.foot_sites)),
        "sensor": (
            mujoco.mjtObj.mjOBJ_SENSOR,
            [
                *robot.foot_pos_sensors,
                *robot.foot_quat_sensors,
                *robot.foot_linvel_sensors,
                robot.gyro_sensor,
                robot.upvector_sensor,
                robot.linvel_sensor,
            ],
        ),
        "keyframe": (mujoco.mjtObj.mjOBJ_KEY, [robot.keyframe]),
    }
    for what, (kind, names) in named.items():
        missing = _missing(model, kind, names)
        if missing:
            raise ModelMismatchError(
                f"robot {robot.name}: {where} has no {what} named {', '.join(map(repr, missing))}, which its config "
                "names"
            )


def check_actuators(model: mujoco.MjModel, robot: RobotConfig, where: str) -> None:
    """One actuator per joint of ``robot.joint_names``, each driving its joint, in joint order: actions are
    written to the actuators in that order."""
    joints = len(robot.joint_names)
    if model.nu != joints:
        raise ModelMismatchError(
            f"robot {robot.name}: {where} has {model.nu} actuators for the {joints} joints its config names; "
            "each joint needs one actuator, in joint order"
        )
    for index, joint in enumerate(robot.joint_names):
        driven = int(model.actuator_trnid[index, 0])
        if int(model.actuator_trntype[index]) != _JOINT_TRANSMISSION or driven != model.joint(joint).id:
            target = model.joint(driven).name if int(model.actuator_trntype[index]) == _JOINT_TRANSMISSION else "?"
            raise ModelMismatchError(
                f"robot {robot.name}: {where}'s actuator {index} drives {target!r}, not joint {joint!r}: each joint "
                "needs one actuator, in joint order"
            )


def check_model(model: mujoco.MjModel, robot: RobotConfig, scene: Path) -> None:
    """``model`` (compiled from ``scene``) holds what ``robot`` names, one actuator per joint, and is not too
    large."""
    where = Path(scene).name
    check_model_size(model, where)
    check_names(model, robot, where)
    check_actuators(model, robot, where)
