"""Height-field contacts of C MuJoCo against MuJoCo Warp's, for resting geoms on a jagged field.

A capsule and a sphere (the G1 foot's two kinds of collision geom) are put at random places and headings just into
a random 10 cm height field, and both engines find their contacts on the same poses (MuJoCo Warp on Warp's CPU
device, float32; C MuJoCo in float64). Printed per geom: contacts per pose, where both find one, how the deepest
contacts differ in depth and normal, and how many poses get a contact whose normal points down. ``--fixed`` runs
MuJoCo Warp with the mjwarp backend's height-field fix (``unilab.sim.hfield_fix``), without which its deepest
contacts are off by up to tens of millimetres.

    python scripts/hfield_contacts.py [--fixed] [--base 1.0] [--ccd-iterations 35] [--poses 64]
"""

from __future__ import annotations

import argparse

import mujoco
import mujoco_warp as mjw
import numpy as np
import warp as wp

SAMPLES, SPACING, STEP, LEVELS = 24, 0.1, 0.02, 6
GEOMS = {1: "capsule", 2: "sphere"}


def model(base: float, ccd_iterations: int, rng: np.random.Generator) -> tuple[mujoco.MjModel, np.ndarray]:
    heights = rng.integers(0, LEVELS, size=(SAMPLES, SAMPLES)) * STEP
    half = (SAMPLES - 1) * SPACING / 2
    top = (LEVELS - 1) * STEP
    xml = f"""<mujoco><asset><hfield name="field" nrow="{SAMPLES}" ncol="{SAMPLES}" size="{half} {half} {top} {base}"/>
    </asset><worldbody><geom type="hfield" hfield="field"/>
    <body pos="0 0 0.2"><freejoint/><geom type="capsule" size="0.015" fromto="-0.09 0 0 0.09 0 0"/></body>
    <body pos="0.3 0 0.2"><freejoint/><geom type="sphere" size="0.02"/></body></worldbody></mujoco>"""
    built = mujoco.MjModel.from_xml_string(xml)
    built.hfield_data[:] = (heights / top).ravel()
    built.opt.ccd_iterations = ccd_iterations
    return built, heights


def poses(heights: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """Each geom at a random place and heading, its centre from 1 cm below to 0.5 cm above the highest sample
    within two samples of it."""
    qpos = np.zeros((count, 14))
    for pose in qpos:
        for start in (0, 7):
            x, y = rng.uniform(-0.8, 0.8, 2)
            col, row = ((np.array([x, y]) + (SAMPLES - 1) * SPACING / 2) / SPACING).astype(int)
            z = heights[max(row - 2, 0) : row + 3, max(col - 2, 0) : col + 3].max() + rng.uniform(-0.01, 0.005)
            yaw = rng.uniform(-np.pi, np.pi)
            pose[start : start + 7] = [x, y, z, np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)]
    return qpos


def c_contacts(m: mujoco.MjModel, qpos: np.ndarray) -> list[list[tuple[int, float, np.ndarray]]]:
    data = mujoco.MjData(m)
    found = []
    for pose in qpos:
        data.qpos[:] = pose
        mujoco.mj_forward(m, data)
        found.append([(int(c.geom2), float(c.dist), c.frame[:3].copy()) for c in data.contact[: data.ncon]])
    return found


def warp_contacts(m: mujoco.MjModel, qpos: np.ndarray) -> list[list[tuple[int, float, np.ndarray]]]:
    wp.init()
    with wp.ScopedDevice("cpu"):
        d = mjw.make_data(m, nworld=len(qpos), nconmax=64, njmax=256)
        d.qpos = wp.array(qpos.astype(np.float32), dtype=float)
        mjw.forward(mjw.put_model(m), d)
        n = int(d.nacon.numpy()[0])
        world, geom = d.contact.worldid.numpy()[:n], d.contact.geom.numpy()[:n]
        dist, frame = d.contact.dist.numpy()[:n], d.contact.frame.numpy()[:n]
    found: list[list[tuple[int, float, np.ndarray]]] = [[] for _ in qpos]
    for k in range(n):
        found[world[k]].append((int(geom[k][1]), float(dist[k]), frame[k][0]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=float, default=1.0, help="the field's base depth below its lowest sample (m)")
    parser.add_argument("--ccd-iterations", type=int, default=35)
    parser.add_argument("--poses", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fixed", action="store_true", help="with the mjwarp backend's height-field fix")
    args = parser.parse_args()
    if args.fixed:
        from unilab.sim import hfield_fix

        print(f"height-field fix installed: {hfield_fix.install()}")
    rng = np.random.default_rng(args.seed)
    m, heights = model(args.base, args.ccd_iterations, rng)
    qpos = poses(heights, args.poses, rng)
    reference, warp = c_contacts(m, qpos), warp_contacts(m, qpos)
    for geom, name in GEOMS.items():
        counts, depth, angle, down = [], [], [], 0
        for ref, got in zip(reference, warp, strict=True):
            ref, got = [c for c in ref if c[0] == geom], [c for c in got if c[0] == geom]
            counts.append((len(ref), len(got)))
            down += any(c[2][2] < -0.1 for c in got)  # a normal pointing down pulls the geom into the field
            if ref and got:
                a, b = min(ref, key=lambda c: c[1]), min(got, key=lambda c: c[1])
                depth.append(abs(a[1] - b[1]))
                angle.append(np.degrees(np.arccos(min(abs(float(np.dot(a[2], b[2]))), 1.0))))
        counts_array, depth_array, angle_array = np.array(counts), np.array(depth), np.array(angle)
        print(
            f"{name}: contacts per pose C {counts_array[:, 0].mean():.2f}, Warp {counts_array[:, 1].mean():.2f}; "
            f"poses both touch {len(depth_array)}: deepest contacts' depths differ > 5 mm in "
            f"{(depth_array > 0.005).sum()} (largest {depth_array.max() * 1000:.1f} mm), normals > 10 degrees "
            f"apart in {(angle_array > 10).sum()}; poses with a MuJoCo Warp normal pointing down {down}"
        )


if __name__ == "__main__":
    main()
