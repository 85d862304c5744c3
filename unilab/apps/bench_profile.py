"""``unilab bench profile``: a canonical workload's trainer, built as a training run builds it and iterated until its
CUDA graphs are recorded, then each graph profiled (``unilab.apps.attribution``) beside the physics stepped alone.

An off-policy workload (SAC, FlashSAC) records three graphs, the env step, the replay write and the update block;
its update's kernels are also booked to the update's phases. An on-policy workload (PPO) records two, the rollout's
step (one env step of every env, acting and bookkeeping included, which the rollout replays ``num_steps_per_env``
times) and the update block; the step's figures are in the unit of ``physics_alone_ms``, the physics' step by
itself.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from unilab.apps.args import ArgumentParser
from unilab.apps.attribution import attribution_table, phase_profile, profile_graphs
from unilab.apps.bench_timing import capture_replay, rate, stand_ctrl, standing
from unilab.apps.train import one_line_errors
from unilab.apps.workloads import CANONICAL_WORKLOADS, algo_and_task
from unilab.terrain import generate

if TYPE_CHECKING:
    from unilab.envs.functional import FunctionalEnv
    from unilab.train.loop import Trainer
    from unilab.train.ppo.config import PPOConfig
    from unilab.train.settings import OffPolicySettings


def bench_profile(workload: str, num_envs: int, replays: int, overrides: Sequence[str]) -> dict:
    """Build the canonical ``workload``'s trainer on CUDA, run it until its graphs are recorded, and profile them.
    The composed config picks the trainer: an override ``algo=...`` or ``task=...`` replaces the workload's."""
    from unilab.apps.compose import compose_config
    from unilab.run.config import task_overrides
    from unilab.run.precompile import step_file
    from unilab.tasks.registry import make_functional_env

    if not torch.cuda.is_available():
        raise ValueError("bench profile needs a CUDA device: it times CUDA graphs and reads their kernels from CUPTI")
    algo, task = algo_and_task(workload)
    cfg = compose_config([f"algo={algo}", f"task={task}", "sim=mjwarp", f"algo.num_envs={num_envs}", *overrides])
    env = make_functional_env(cfg.task.name, sim="mjwarp", num_envs=num_envs, device="cuda", **task_overrides(cfg))
    profile = profile_on_policy if cfg.algo.on_policy else profile_off_policy
    kept = step_file(cfg, "cuda", env.sim.model)  # the env step a run of this config loads (algo.precompile)
    return {
        "bench": "profile",
        "workload": workload,
        "algo": cfg.algo.name,
        "task": cfg.task.name,
        "num_envs": num_envs,
        "replays": replays,
        **profile(env, cfg.algo, replays, kept),
        "physics_alone_ms": physics_alone_ms(env, replays),
    }


def profile_off_policy(env: FunctionalEnv, cfg: OffPolicySettings, replays: int, kept: Path | None) -> dict:
    """The env step, replay write and update graphs; then the update block launched eagerly once more, so that its
    host ranges exist: the same kernels, by phase."""
    from unilab.train.off_policy import UPDATE_PHASES, OffPolicyTrainer

    trainer = OffPolicyTrainer(env, cfg, step_file=kept)
    while not trainer.ready:
        trainer.collect()
    graphs = profile_trainer(trainer, 3, replays)  # the first iteration records the replay-write and update graphs
    batch = trainer.replay.sample(trainer.learner.minibatch * cfg.updates_per_step)
    trainer.learner.profile_phases = True
    phases = phase_profile(lambda: trainer.learner.update(batch), UPDATE_PHASES, repeats=3, device=env.device)
    order = "env step beside the updates" if cfg.overlap_updates else "env step, then the updates"
    return {"graphs": graphs, "iteration_order": order, "update_phases": phases}


def profile_on_policy(env: FunctionalEnv, cfg: PPOConfig, replays: int, kept: Path | None) -> dict:
    """The rollout's step graph (one env step, acting and bookkeeping included: the unit of ``physics_alone_ms``)
    and the update graph."""
    from unilab.train.on_policy import OnPolicyTrainer

    trainer = OnPolicyTrainer(env, cfg, step_file=kept)
    graphs = profile_trainer(trainer, 2, replays)  # the first iteration records both graphs
    return {"graphs": graphs, "iteration_order": f"{cfg.num_steps_per_env} rollout steps, then their update"}


def profile_trainer(trainer: Trainer, warmups: int, replays: int) -> dict:
    """``trainer``'s graphs profiled after ``warmups`` iterations, each graph alone and the iteration as training
    runs it (``unilab.apps.attribution.profile_graphs``)."""

    def iteration() -> None:
        trainer.collect()
        trainer.update()

    for _ in range(warmups):
        iteration()
    return profile_graphs({name: graph.replay for name, graph in trainer.graphs.items()}, iteration, replays)


def physics_alone_ms(env: FunctionalEnv, replays: int) -> float:
    """Milliseconds per step of the env's own backend (the task's physics settings) stepping from the stand, on its
    terrain's tiles if it has one, in a graph of its own: what the env step's physics costs with nothing around it."""
    sim, terrain = env.sim, env.task.terrain
    origins = None if terrain is None else torch.as_tensor(generate(terrain).origins.reshape(-1, 3))
    (state, restand), ctrl = standing(sim, 0, origins), stand_ctrl(sim)
    physics = capture_replay(lambda: sim.step_(state, ctrl), env.device)
    return 1000 * env.num_envs / rate(physics, replays, env.num_envs, env.device, restand)


def add_profile_options(prof: argparse.ArgumentParser) -> None:
    """The options of ``bench profile``."""
    prof.add_argument("--workload", choices=list(CANONICAL_WORKLOADS), default="sac")
    prof.add_argument("--num-envs", type=int, default=2048)
    prof.add_argument("--replays", type=int, default=50, help="replays per timing and per kernel trace")
    prof.add_argument("--out", type=Path, default=None, help="also write the Markdown table here")
    prof.add_argument("overrides", nargs="*", help="Hydra overrides applied after the workload's")


def run_profile(parser: ArgumentParser, args: argparse.Namespace) -> None:
    """``bench profile``: its sizes checked, the workload profiled, then its JSON line and its Markdown table printed
    (the table also written to ``--out``)."""
    if args.num_envs < 1 or args.replays < 1:
        parser.error(f"--num-envs and --replays must be >= 1, got {args.num_envs} and {args.replays}")
    with one_line_errors(parser.prog):
        result = bench_profile(args.workload, args.num_envs, args.replays, args.overrides)
    print(json.dumps(result), flush=True)
    table = attribution_table(result)
    print(table)
    if args.out is not None:
        args.out.write_text(table + "\n")
