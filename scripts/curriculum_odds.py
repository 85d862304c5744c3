"""``python scripts/curriculum_odds.py [--task g1_walk_rough] [--episodes 200000]``: where a task's terrain curriculum
settles a robot that follows every command exactly.

A curriculum rule is only as good as what it asks of a perfect walker: if such a robot is moved down, the policy
trains on the easy rows however well it walks. This draws the task's own commands and spawn offsets, walks each
episode's commanded arc to its end (or, where the task ends an episode when its robot crosses its tile, to that
crossing), hands the end states to the task's curriculum term, and prints the odds of moving up and down per
episode, how long a perfect walker's episodes last, and the rows the envs settle on (a Markov chain over rows, with
the spawn's redraw of envs that pass the last row).
"""

from __future__ import annotations

import argparse
import math
from types import SimpleNamespace

import torch
from tensordict import TensorDict

from unilab.core.rng import make_rng, uniform
from unilab.tasks.registry import make_task


def arc_end(command: torch.Tensor, heading: torch.Tensor, duration_s: float) -> torch.Tensor:
    """Where (N, 2) a robot ends that walks body-frame ``command`` (vx, vy, wz) exactly for ``duration_s`` from the
    origin, facing ``heading``: the body-frame velocity integrated while the body turns at wz."""
    w, t = command[:, 2], duration_s
    turning = w.abs() > 1e-6
    safe = torch.where(turning, w, 1.0)
    along = torch.where(turning, torch.sin(safe * t) / safe, torch.full_like(w, t))  # integral of cos(w s)
    across = torch.where(turning, (1 - torch.cos(safe * t)) / safe, torch.zeros_like(w))  # integral of sin(w s)
    vx, vy = command[:, 0], command[:, 1]
    x, y = along * vx - across * vy, across * vx + along * vy
    cos, sin = torch.cos(heading), torch.sin(heading)
    return torch.stack((cos * x - sin * y, sin * x + cos * y), dim=-1)


def crossing(
    command: torch.Tensor, heading: torch.Tensor, start: torch.Tensor, centre: torch.Tensor, reach: float, t: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """When (N,) the commanded arc from ``start`` first passes ``reach`` from ``centre`` within ``t`` seconds (``t``
    where it never does), looked up every control step of 0.02 s, and where (N, 2) the walker then is."""
    when = torch.full((command.shape[0],), t)
    where = start + arc_end(command, heading, t)
    for step in reversed(range(1, round(t / 0.02) + 1)):  # backwards: the earliest crossing is written last
        at = start + arc_end(command, heading, step * 0.02)
        out = torch.linalg.vector_norm(at - centre, dim=-1) > reach
        when = torch.where(out, step * 0.02, when)
        where = torch.where(out.unsqueeze(-1), at, where)
    return when, where


def odds(task_name: str, episodes: int, seed: int = 0) -> dict[str, object]:
    """Per-episode odds of a perfect walker moving up and down from a middle row, its mean episode length in
    seconds, and the rows it settles on."""
    task = make_task(task_name)
    if task.terrain is None or "terrain_levels" not in task.curricula:
        raise SystemExit(f"{task_name} has no terrain curriculum")
    curriculum = task.curricula["terrain_levels"]
    command = task.commands[curriculum.params["command"]]
    steps = 1  # every episode runs to its time limit, whatever its length in steps
    ctx = SimpleNamespace(num_envs=episodes, max_episode_steps=steps)
    rng = make_rng(seed)
    commands = command.resample(None, ctx, None, rng, **command.params)
    spawn = task.events["root_pose"].params
    draws = uniform(rng, 7, (episodes, 3), -1.0, 1.0)
    origins = curriculum.params["origins"]
    rows, cols = origins.shape[:2]
    middle = float(rows // 2)
    level = torch.full((episodes,), middle)
    centre = origins[int(middle), torch.arange(episodes) % cols, :2]
    start = centre + spawn["xy_range"] * draws[:, :2]
    heading, length = math.pi * draws[:, 2], task.episode_length_s
    if "crossed_tile" in task.terminations:  # the episode ends as the robot leaves its tile's half-width
        reach = task.terminations["crossed_tile"].params["tile_size"] / 2
        seconds, end = crossing(commands, heading, start, centre, reach, length)
    else:
        seconds, end = torch.full((episodes,), length), start + arc_end(commands, heading, length)
    qpos = torch.zeros(episodes, 7)
    qpos[:, :2] = end
    env = {
        "terrain_level": level,
        curriculum.params["command"]: commands,
        "episode_step": torch.full((episodes,), steps),
    }
    state = TensorDict({"env": env, "sim": {"qpos": qpos}}, batch_size=[])
    done = torch.ones(episodes, dtype=torch.bool)
    moved = curriculum.func(state, ctx, done, ~done, **curriculum.params)[("env", "terrain_level")] - level
    up, down = float((moved > 0).float().mean()), float((moved < 0).float().mean())
    return {"up": up, "down": down, "episode_s": float(seconds.mean()), "settled": settle(rows, up, down)}


def settle(rows: int, up: float, down: float) -> list[float]:
    """The stationary share of envs on each row when every episode moves an env up with odds ``up`` and down with
    ``down`` (never below row 0), and an env that passes the last row restarts on a row drawn uniformly."""
    step = torch.zeros(rows, rows, dtype=torch.float64)
    for row in range(rows):
        if row + 1 < rows:
            step[row, row + 1] += up
        else:
            step[row] += up / rows
        step[row, max(row - 1, 0)] += down
        step[row, row] += 1.0 - up - down
    share = torch.full((rows,), 1.0 / rows, dtype=torch.float64)
    for _ in range(20_000):
        share = share @ step
    return share.tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="g1_walk_rough")
    parser.add_argument("--episodes", type=int, default=200_000)
    args = parser.parse_args()
    result = odds(args.task, args.episodes)
    settled = result["settled"]
    mean = sum(row * share for row, share in enumerate(settled))
    print(f"{args.task}: a perfect walker moves up in {result['up']:.1%} of episodes, down in {result['down']:.1%}")
    climb = (result["up"] - result["down"]) / result["episode_s"] * 60
    print(f"its episodes last {result['episode_s']:.1f} s on average: {climb:.1f} rows a minute of simulated time")
    print("rows it settles on: " + ", ".join(f"{row}: {share:.1%}" for row, share in enumerate(settled)))
    print(f"mean row {mean:.2f}")


if __name__ == "__main__":
    main()
