"""``python scripts/fall_census.py --checkpoint model.pt --suite stairs_down [--without touchdown]``: what a policy's
robots touch the terrain with, and whether a fall rule agrees with it. ``--onnx policy.onnx`` (``train``'s or ``unilab
deploy export``'s: the actor alone, where a checkpoint carries the critics and the optimisers too) stands in for the
checkpoint. ``--stumble-ratios 2 5`` also reads each foot's net ground force and says, for each ratio, how many of the
steps where a foot struck a riser the stumble penalty (``task.stumble``) would count at that ratio, and how many of
the other steps with a foot down.

A termination that stands in for a fall (a knee near the ground, say) is judged by what it ends: robots that are down,
or robots that would have walked on. This rolls a checkpoint at one row of a terrain suite on C MuJoCo, on the CPU, with
the terms named by ``--without`` (by default the fall rule the run trained under) switched off, so the episodes go on
where those terms would have ended them. After every step it evaluates those terms by hand on the state and asks
MuJoCo's collision detection, on each env's pose, which of the robot's bodies other than its feet touch the terrain. It
prints, over the envs, how many episodes each term would have ended and each body touched the ground in, how many of the
term's endings came with a body on the ground at that step, what became of those episodes (the trunk on the ground, the
peers' fall for a quadruped; another term's ending; walking on to the time limit or off the tile), and, where the ground
under the robot slopes, how far its trunk tilts from the vertical against the ground's slope: whether it climbs along a
flight or holds itself level.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import torch

from unilab.apps.args import InputError
from unilab.apps.policy import policy_source
from unilab.apps.rollout import task_of
from unilab.apps.suites import suite_overrides
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner
from unilab.managers.terms import TerminationTerm
from unilab.mdp import rewards
from unilab.mdp.terrain import ground_normal
from unilab.run.checkpoint import CheckpointError
from unilab.sim.contact_sensors import ground_force_sensor
from unilab.tasks.registry import build_env
from unilab.terrain import generate
from unilab.terrain.heightmap import HeightMap


def feet_geoms(model: mujoco.MjModel, pattern: str) -> frozenset[int]:
    """The geoms whose names match ``pattern``: the feet, whose contacts with the ground are the walk itself. A
    foot's geom may share its body with a shin (the Go1's calf), so the feet are told apart by geom, not by body."""
    names = (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(model.ngeom))
    return frozenset(g for g, name in enumerate(names) if re.fullmatch(pattern, name))


def touching(
    model: mujoco.MjModel, data: mujoco.MjData, qpos: np.ndarray, feet: frozenset[int]
) -> tuple[set[int], bool]:
    """The bodies (ids) with a geom other than ``feet`` that penetrates a geom of the world body (the terrain) at
    ``qpos``, and whether a foot then meets the terrain on a face that stands (a riser: the contact's normal within
    ``RISER_DEG`` of level), where a foot that should have cleared a step strikes it."""
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    mujoco.mj_collision(model, data)
    bodies, riser = set(), False
    for contact in data.contact[: data.ncon]:
        geoms = (int(contact.geom1), int(contact.geom2))
        a, b = (int(model.geom_bodyid[g]) for g in geoms)
        if contact.dist < 0 and (a == 0) != (b == 0):
            robot_geom = geoms[1] if a == 0 else geoms[0]
            if robot_geom not in feet:
                bodies.add(int(model.geom_bodyid[robot_geom]))
            elif abs(contact.frame[2]) < RISER_NORMAL_Z:  # the frame's first row is the normal
                riser = True
    return bodies, riser


FALL_TERMS = ("touchdown", "ground_contact")  # the knee rule, the trunk rule (``task.falls``)
RISER_DEG = 30.0  # a foot contact whose normal lies this close to level is against a standing face: a riser
RISER_NORMAL_Z = math.sin(math.radians(RISER_DEG))
RISER_LOOKBACK = 25  # control steps (0.5 s): a strike this soon before a fall is counted with the fall
SLOPED = 10.0  # degrees: ground this steep is a flight or a slope, where a quadruped's trunk may follow the ground
SLOPE_SPAN = 0.3  # m either side of the base: two of the stairs' treads (``ground_normal``)


@dataclass
class Census:
    """Per env, the first step each term fired and each body touched the terrain (-1: never); and, per term, the
    envs where a body touched the terrain at the step the term first fired."""

    steps: int
    down: tuple[str, ...] = ()  # bodies whose touching the terrain is a fall (the peers' quadrupeds: the base)
    terms: dict[str, torch.Tensor] = field(default_factory=dict)
    bodies: dict[str, torch.Tensor] = field(default_factory=dict)
    term_with_contact: dict[str, torch.Tensor] = field(default_factory=dict)
    ended: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.long))  # step (-1: ran on)
    terminated: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.bool))  # by a kept term
    risers: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.bool))  # (envs, steps)
    # (envs, steps) each, where the feet's ground forces were read: whether a foot touched the ground, and, per ratio
    # judged, whether the stumble penalty (``rewards.feet_stumble``) counted a foot
    feet_down: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0, dtype=torch.bool))
    stumbles: dict[float, torch.Tensor] = field(default_factory=dict)
    sloped_steps: int = 0  # env steps on ground sloping SLOPED degrees or more, and the sums of both angles there
    slope_sum: float = 0.0
    tilt_sum: float = 0.0

    def lines(self) -> list[str]:
        n = next(iter(self.terms.values())).numel() if self.terms else 0
        out = [f"{n} envs, {self.steps} steps"]
        for name, first in self.terms.items():
            fired = first >= 0
            out.append(
                f"  term {name:20s} would end {int(fired.sum()):4d} episodes; "
                f"{int(self.term_with_contact[name].sum())} of them with a body on the ground then"
            )
            if self.down and fired.any():
                out.append(f"    {self.after(first)}")
        if self.down:
            down = int(self.down_touched().sum())
            out.append(
                f"  {' or '.join(self.down)} touched the terrain in {down} episodes: a rule on their contact's falls"
            )
        if self.risers.numel():
            out.append(self.riser_line())
        out.extend(self.stumble_lines())
        for name, first in sorted(self.bodies.items(), key=lambda item: -int((item[1] >= 0).sum())):
            touched = int((first >= 0).sum())
            if touched:
                out.append(f"  body {name:20s} touched the terrain in {touched:4d} episodes")
        if self.sloped_steps:
            out.append(
                f"  on ground sloping {SLOPED:.0f} degrees or more ({self.sloped_steps} env steps): the ground "
                f"{self.slope_sum / self.sloped_steps:.1f} degrees, the trunk {self.tilt_sum / self.sloped_steps:.1f} "
                "degrees from the vertical"
            )
        return out

    def riser_line(self) -> str:
        """In how many episodes a foot struck a riser, how many of the falls (a body of ``down`` on the ground) came
        within ``RISER_LOOKBACK`` steps after one, and, for scale, the share of all steps before a fall or an episode's
        end that came that soon after one: falls a strike precedes more often than that may be trips."""
        falls = self.first_down()
        recent = self.after_riser()
        lived = self.lived()
        fell = falls >= 0
        tripped = int(recent[fell, falls[fell]].sum())
        return (
            f"  a foot struck a riser (its contact's normal within {RISER_DEG:.0f} degrees of level) in "
            f"{int(self.risers.any(1).sum())} episodes; {tripped} of the {int(fell.sum())} falls came within "
            f"{RISER_LOOKBACK} steps after one, as did {100 * float(recent[lived].float().mean()):.0f} % of the steps "
            "before a fall or the episode's end"
        )

    def lived(self) -> torch.Tensor:
        """(envs, steps): the steps up to each env's fall (a body of ``down`` on the ground) or its episode's end."""
        falls = self.first_down()
        last = torch.where(falls >= 0, falls, torch.where(self.ended >= 0, self.ended, self.steps - 1))
        return torch.arange(self.steps) <= last[:, None]

    def stumble_lines(self) -> list[str]:
        """For each ratio judged (``stumbles``): the share of the env steps with a riser strike and a foot down, up to
        a fall or the episode's end, that the stumble penalty counted at that ratio, and of the other such steps. A
        rule that counts few strikes pays for few trips, whatever its weight; a robot already down is left out."""
        if not self.stumbles:
            return []
        read = self.feet_down & self.lived()
        struck, other = read & self.risers, read & ~self.risers
        lines = []
        for ratio, counted in self.stumbles.items():
            lines.append(
                f"  the stumble rule at ratio {ratio:g} would count {_share(counted, struck)} of the "
                f"{int(struck.sum())} steps with a riser strike and {_share(counted, other)} of the "
                f"{int(other.sum())} other steps with a foot down, before any fall"
            )
        return lines

    def after_riser(self) -> torch.Tensor:
        """(envs, steps): whether a foot struck a riser at that step or in the ``RISER_LOOKBACK`` steps before it."""
        strikes = torch.nn.functional.pad(self.risers.long().cumsum(1), (1, 0))  # [:, t + 1]: strikes in steps 0..t
        t = torch.arange(self.steps)
        return strikes[:, t + 1] - strikes[:, (t - RISER_LOOKBACK).clamp(min=0)] > 0

    def first_down(self) -> torch.Tensor:
        """Per env, the first step a body of ``down`` touched the terrain (-1: never)."""
        firsts = torch.stack([self.bodies[name] for name in self.down])
        earliest = torch.where(firsts >= 0, firsts, self.steps).min(0).values
        return torch.where(earliest < self.steps, earliest, -1)

    def down_touched(self) -> torch.Tensor:
        """Per env, whether a body of ``down`` touched the terrain in its episode."""
        return torch.stack([self.bodies[name] >= 0 for name in self.down]).any(0)

    def after(self, first: torch.Tensor) -> str:
        """What became of the episodes a judged term would have ended at step ``first`` (per env, -1: never): a fall
        would show as a body of ``down`` on the ground or an ending by the env's own terms; a robot that was not down
        walks on to the time limit or off its tile."""
        rest = first >= 0
        down = rest & self.down_touched()
        rest &= ~down
        ended_later = rest & self.terminated
        rest &= ~self.terminated
        walked_on = rest & (self.ended >= 0)
        return (
            f"of those, {' or '.join(self.down)} touched the terrain in {int(down.sum())}; "
            f"the env's other terms ended {int(ended_later.sum())}; "
            f"{int(walked_on.sum())} walked on to the time limit or off their tile; "
            f"{int((rest & (self.ended < 0)).sum())} were still going when the census stopped"
        )


@torch.no_grad()
def census(
    env: FunctionalEnv,
    policy: Callable[[torch.Tensor], torch.Tensor],
    judged: Mapping[str, TerminationTerm],
    feet: str,
    steps: int,
    seed: int = 0,
    ground: HeightMap | None = None,
    down: tuple[str, ...] = (),
    force_sensors: tuple[str, ...] = (),
    stumble_ratios: tuple[float, ...] = (),
) -> Census:
    """Roll ``policy`` on ``env`` (C MuJoCo: its model and qpos) for ``steps`` steps, each env's first episode only,
    evaluating ``judged`` (terms the env itself no longer applies) and the terrain contacts of every body but the
    world, through any geom but those whose names match ``feet``; on ``ground``, also how far the trunk tilts from
    the vertical where the ground under it slopes (does it follow the ground or hold itself level?); what became of
    the episodes a judged term would have ended, a body of ``down`` (default: the robot's base) on the ground the
    fall; with ``force_sensors`` (the feet's net ground forces), which steps the stumble penalty counts at each of
    ``stumble_ratios``."""
    model = env.sim.model
    data = mujoco.MjData(model)
    names = {body: name for name, body in env.ctx.body_ids.items()}
    foot_geoms = feet_geoms(model, feet)
    n = env.num_envs
    result = Census(
        steps,
        down=down or (env.task.robot.base_body,),
        terms={name: torch.full((n,), -1) for name in judged},
        bodies={names[b]: torch.full((n,), -1) for b in range(1, model.nbody)},
        term_with_contact={name: torch.zeros(n, dtype=torch.bool) for name in judged},
        ended=torch.full((n,), -1),
        terminated=torch.zeros(n, dtype=torch.bool),
        risers=torch.zeros(n, steps, dtype=torch.bool),
        feet_down=torch.zeros(n, steps, dtype=torch.bool),
        stumbles={ratio: torch.zeros(n, steps, dtype=torch.bool) for ratio in stumble_ratios} if force_sensors else {},
    )
    running = torch.ones(n, dtype=torch.bool)
    runner = EnvRunner(env, lambda obs: policy(obs["policy"]), seed=seed)
    for step in range(steps):
        transition = runner.step()
        state = runner.state
        qpos = state["sim", "qpos"].double().numpy()
        fired = {name: term.func(state, env.ctx, **term.params).cpu() for name, term in judged.items()}
        if ground is not None:
            _angles(result, state, env, ground, running)
        if force_sensors:
            readings = state["sim", "sensordata"]
            force = torch.stack([env.ctx.sensor(readings, name)[:, :3] for name in force_sensors], dim=1)
            result.feet_down[:, step] = running & (force != 0).any(-1).any(-1).cpu()
            for ratio, counted in result.stumbles.items():
                counted[:, step] = running & (rewards.feet_stumble(state, env.ctx, force_sensors, ratio) > 0).cpu()
        for i in torch.nonzero(running).flatten().tolist():
            down, result.risers[i, step] = touching(model, data, qpos[i], foot_geoms)
            for body in down:
                if result.bodies[names[body]][i] < 0:
                    result.bodies[names[body]][i] = step
            for name, hits in fired.items():
                if hits[i] and result.terms[name][i] < 0:
                    result.terms[name][i] = step
                    result.term_with_contact[name][i] = bool(down)
        done = transition["next", "done"].reshape(-1).cpu() & running
        result.ended[done] = step
        result.terminated |= done & transition["next", "terminated"].reshape(-1).cpu()
        running &= ~done
        if not running.any():
            break
    return result


def _share(counted: torch.Tensor, among: torch.Tensor) -> str:
    return f"{100 * float(counted[among].float().mean()):.1f} %" if among.any() else "-"


def _angles(result: Census, state, env: FunctionalEnv, ground: HeightMap, running: torch.Tensor) -> None:
    """Adds the ground's slope under each running env's base and its trunk's tilt where the slope is ``SLOPED``
    or more."""
    robot = env.task.robot
    up = env.ctx.sensor(state["sim", "sensordata"], robot.upvector_sensor)
    normal = ground_normal(ground, state["sim", "xpos"][:, env.ctx.body_ids[robot.base_body], :2], SLOPE_SPAN)
    slope, tilt = (torch.rad2deg(torch.acos(z.clamp(-1.0, 1.0))) for z in (normal[:, 2], up[:, 2]))
    sloped = running & (slope >= SLOPED)
    result.sloped_steps += int(sloped.sum())
    result.slope_sum += float(slope[sloped].sum())
    result.tilt_sum += float(tilt[sloped].sum())


def fall_terms(terminations: Mapping[str, TerminationTerm]) -> list[str]:
    """The terms that end a walk on terrain as a fall, of those the task has: the knee rule (``touchdown``) or the
    trunk's contact (``ground_contact``), whichever the checkpoint's run trained under."""
    return [name for name in FALL_TERMS if name in terminations]


def main(argv: list[str] | None = None) -> Census:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    policy_file = parser.add_mutually_exclusive_group(required=True)
    policy_file.add_argument("--checkpoint", type=Path)
    policy_file.add_argument("--onnx", type=Path, help="an exported policy, with the task and knobs it trained on")
    parser.add_argument("--suite", required=True, help="a terrain suite (stairs_up, stairs_down, slope, rough)")
    parser.add_argument("--row", type=int, default=None, help="the terrain row (default: the hardest)")
    parser.add_argument(
        "--without", nargs="*", default=None, help="termination terms to judge, not apply (default: the fall rule's)"
    )
    parser.add_argument("--num-envs", type=int, default=100)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--feet", default=".*foot.*", help="regex of the feet's geom names (left out)")
    parser.add_argument("--down", nargs="*", default=[], help="bodies whose touching is a fall (default: the base)")
    parser.add_argument(
        "--stumble-ratios", nargs="*", type=float, default=[], help="ratios to judge the stumble rule at (e.g. 2 5)"
    )
    args = parser.parse_args(argv)
    try:
        source = policy_source(args.checkpoint, args.onnx, None)
        overrides = suite_overrides(source.task, args.suite, source.overrides)
        base = task_of(source.task, overrides)
    except (InputError, CheckpointError, ValueError) as exc:
        parser.error(str(exc))
    if base.terrain is None:
        parser.error(f"{source.task} walks on a flat floor; the census reads a terrain's rows")
    without = fall_terms(base.terminations) if args.without is None else args.without
    missing = [name for name in without if name not in base.terminations]
    if missing:
        parser.error(f"{source.task} has no termination {missing[0]!r}; its terms: {', '.join(base.terminations)}")
    overrides["terrain_level"] = base.terrain.rows - 1 if args.row is None else args.row
    judged = {name: base.terminations[name] for name in without}
    overrides["terminations"] = {k: v for k, v in base.terminations.items() if k not in judged}
    if any(ratio <= 0 for ratio in args.stumble_ratios):
        parser.error(f"--stumble-ratios must be positive, got {args.stumble_ratios}")
    if args.stumble_ratios and not overrides.get("stumble"):
        overrides["stumble"] = -1.0  # for its force sensors: a reward's weight does not reach the policy
    try:
        config = task_of(source.task, overrides)
    except ValueError as exc:
        parser.error(str(exc))
    force_sensors = tuple(map(ground_force_sensor, config.ground_force_parts)) if args.stumble_ratios else ()
    env = build_env(config, sim="mujoco", num_envs=args.num_envs, device="cpu")
    policy = source.policy(env)
    ground = generate(config.terrain).height_map()
    unknown = [name for name in args.down if name not in env.ctx.body_ids]
    if unknown:
        parser.error(f"{source.task}'s robot has no body {unknown[0]!r}")
    result = census(
        env, policy, judged, args.feet, args.steps, args.seed, ground, tuple(args.down), force_sensors,
        tuple(args.stumble_ratios),
    )  # fmt: skip
    print(
        f"{(args.checkpoint or args.onnx).name}, {args.suite} row {overrides['terrain_level']}: "
        + "\n".join(result.lines())
    )
    return result


if __name__ == "__main__":
    main()
