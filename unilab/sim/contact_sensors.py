"""Contact sensors that count a body's contacts with the ground.

A termination that asks "is the trunk on the ground" could guess from heights (the body's lowest points against the
height map), but on stairs of boxes the map ramps where the scene has a wall (ADR 16), and a box's face can rest on a
step's nose with every corner clear. MuJoCo's own contact sensor counts what the collision stage found, and both
engines fill it in their sensor stage: a term reads it as it reads any other sensor, inside the captured step.
The count is the control step's (its last substep's collisions); a world just reset carries none that means
anything until it has stepped, so only terms that judge a step (terminations, rewards) read it.
"""

from __future__ import annotations

import mujoco

WORLD = "world"  # every scene's ground (plane, height fields, boxes) hangs off the world body
_FOUND = 1  # the sensor's data: the number of matching contacts (MuJoCo's ``data="found"``)
_FORCE = 1 << 1  # the sensor's data: the contact force (MuJoCo's ``data="force"``)
_NETFORCE = 3  # the matches reduced to their net force, in the world frame (MuJoCo's ``reduce="netforce"``; 0: none)


_SUFFIX = "_ground_contacts"


def ground_contact_sensor(body: str) -> str:
    """The name of the sensor that counts ``body``'s contacts with the ground."""
    return f"{body}{_SUFFIX}"


def sensed_body(sensor: str) -> str:
    """The body whose ground contacts ``sensor`` counts: ``ground_contact_sensor``'s inverse."""
    if not sensor.endswith(_SUFFIX) or sensor == _SUFFIX:
        raise ValueError(f"{sensor!r} is not a ground contact sensor")
    return sensor.removesuffix(_SUFFIX)


def _add_ground_sensor(spec: mujoco.MjSpec, name: str, kind: mujoco.mjtObj, of: str, data: int, reduce: int) -> None:
    """A contact sensor ``name`` of ``of`` (a body or a geom, by ``kind``) against the world body, reading ``data``
    reduced by ``reduce`` into one slot."""
    sensor = spec.add_sensor(
        name=name,
        type=mujoco.mjtSensor.mjSENS_CONTACT,
        objtype=kind,
        objname=of,
        reftype=mujoco.mjtObj.mjOBJ_BODY,
        refname=WORLD,
    )
    sensor.intprm[0], sensor.intprm[1], sensor.intprm[2] = data, reduce, 1


def add_ground_contact_sensors(spec: mujoco.MjSpec, bodies: tuple[str, ...]) -> None:
    """A sensor per body of ``bodies``: how many contacts its geoms make with the world body's geoms. The robots'
    geoms never collide with one another in these scenes, so those are the ground's."""
    for body in bodies:
        if spec.body(body) is None:
            raise ValueError(f"no body named {body!r} for a ground contact sensor")
        _add_ground_sensor(spec, ground_contact_sensor(body), mujoco.mjtObj.mjOBJ_BODY, body, _FOUND, 0)


def ground_force_sensor(part: str) -> str:
    """The name of the sensor that reads the net force between ``part`` (a geom or a body) and the ground."""
    return f"{part}_ground_force"


def add_ground_force_sensors(spec: mujoco.MjSpec, parts: tuple[str, ...]) -> None:
    """A sensor per geom or body of ``parts`` (a geom where the name is both): the net force of its contacts (a
    body's: all its geoms') with the world body's geoms, in the world frame (3 values; zero without a contact). Both
    engines reduce the matches the same way, so a term can tell a foot loaded from below (a tread) from one pushed
    sideways (a riser)."""
    for part in parts:
        if spec.geom(part) is not None:
            kind = mujoco.mjtObj.mjOBJ_GEOM
        elif spec.body(part) is not None:
            kind = mujoco.mjtObj.mjOBJ_BODY
        else:
            raise ValueError(f"no geom or body named {part!r} for a ground force sensor")
        _add_ground_sensor(spec, ground_force_sensor(part), kind, part, _FORCE, _NETFORCE)
