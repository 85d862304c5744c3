"""On-policy trainer over the functional env: a rollout of every env, then the learner's epochs of updates.

Schedule: iteration i runs ``num_steps_per_env`` env steps of every env with the current policy (act, step,
write into a preallocated ``[num_steps_per_env, num_envs]`` rollout buffer on the device), then the learner's
update block on that rollout (GAE, epochs of minibatch updates, normaliser statistics). The rollout of i+1 acts
with the weights the updates of i left: no policy lag, so nothing overlaps. On CUDA one step of the rollout (act,
step, write its row, count) is recorded once as a CUDA graph and replayed ``num_steps_per_env`` times, and the update
block is another graph; an iteration replays them with no host sync.
One iteration is the rollout and its updates: ``num_envs * num_steps_per_env`` env steps per rank.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from tensordict import TensorDict

from torchrl_ext.distributed import ALONE, World
from unilab.core.spec import EnvSpec
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner
from unilab.train.learner import learner_class
from unilab.train.loop import Trainer, scalar_curricula
from unilab.train.ppo.config import PPOConfig
from unilab.train.seeding import rank_seed

# What a rollout keeps of each transition: the update needs no next policy observation, only the next critic's
# (the value bootstrap at the end of the rollout and at truncations).
ROLLOUT_KEYS = (
    "policy",
    "critic",
    "action",
    ("next", "critic"),
    ("next", "reward"),
    ("next", "done"),
    ("next", "terminated"),
)


def rollout_buffer(spec: EnvSpec, steps: int) -> TensorDict:
    """The preallocated ``[steps, num_envs]`` buffer every rollout writes into, in place."""
    shape, dev = (steps, spec.num_envs), spec.device
    obs = {group: torch.zeros(*shape, spec.obs_dims[group], device=dev) for group in ("policy", "critic")}
    flags = {key: torch.zeros(shape, dtype=torch.bool, device=dev) for key in ("done", "terminated")}
    return TensorDict(
        {
            **obs,
            "action": torch.zeros(*shape, spec.action_dim, device=dev),
            "next": {"critic": torch.zeros_like(obs["critic"]), "reward": torch.zeros(shape, device=dev), **flags},
        },
        batch_size=shape,
    )


def matmul_precision(cfg: PPOConfig) -> str:
    """The float32 matmuls' precision the rollout and the update run under. Their GEMMs are most of an iteration at
    thousands of envs; TF32 runs them on the tensor cores (float32 storage and accumulation, 10-bit mantissa
    products)."""
    return "tf32" if cfg.tf32 else "ieee"


@contextlib.contextmanager
def float32_matmuls(precision: str) -> Iterator[None]:
    """CUDA's float32 matmuls at ``precision`` (``"tf32"`` or ``"ieee"``) inside, as they were outside.

    The flag is process-wide in torch, so it is held only around this trainer's own work: Inductor compiles and a
    CUDA graph records the kernels chosen under it, and anything else in the process (an eval, another trainer)
    keeps its own precision."""
    matmul = torch.backends.cuda.matmul
    before, matmul.fp32_precision = matmul.fp32_precision, precision
    try:
        yield
    finally:
        matmul.fp32_precision = before


class OnPolicyTrainer(Trainer):
    """Runs the loop for any on-policy algorithm's learner (``learner_class(cfg)``: PPO's).

    With several ranks (``world``) each rank collects its own envs' rollout with its own env and action-noise
    seeds; the learner averages gradients, the KL its learning rate follows and the normaliser statistics inside
    the update block, so every rank takes the same steps and the loop is the same on every rank.
    """

    def __init__(self, env: FunctionalEnv, cfg: PPOConfig, world: World = ALONE, step_file: Path | None = None) -> None:
        if not cfg.on_policy:
            raise ValueError(f"{cfg.name!r} is an off-policy algo: unilab.train.off_policy.OffPolicyTrainer runs it")
        self.env, self.cfg, self.world = env, cfg, world
        spec = env.spec()
        self.device = spec.device
        torch.manual_seed(rank_seed(cfg.seed, "loss", world.rank))  # nothing should draw from it; pinned anyway
        self.learner = learner_class(cfg)(spec, cfg, world)
        # The shared init seed gave every rank the same weights already; rank 0's win if a platform differs.
        world.broadcast_(self.learner.shared_tensors())
        self.capture = spec.graph_capturable
        # The runner steps eagerly (compiled on CUDA); the rollout's step graph records it with everything else.
        self.runner = EnvRunner(
            env,
            self.learner.act,
            seed=rank_seed(cfg.seed, "env", world.rank),
            capture=False,
            compile=self.capture and cfg.compile,
            precompiled=step_file,  # where the compiled step is kept (unilab.run.precompile)
        )
        self.rollout = rollout_buffer(spec, cfg.num_steps_per_env)
        # The rollout row the next step writes, on the device: the one recorded step writes row after row on replay.
        self._row = torch.zeros(1, dtype=torch.long, device=self.device)
        self._matmul_precision = matmul_precision(cfg)
        self.steps_per_iteration = env.num_envs * cfg.num_steps_per_env  # env steps of one iteration on this rank
        self.iteration = 0
        self.env_steps = 0
        self._open_book(env.num_envs, spec.reward_terms, scalar_curricula(env))

    @property
    def ready(self) -> bool:
        """Always: an on-policy iteration needs no data gathered before it."""
        return True

    def collect(self) -> None:
        """One rollout: ``num_steps_per_env`` steps of every env into the rollout buffer, with episode statistics.

        On CUDA the first step runs eagerly, loading all that the step runs, and is then recorded as a CUDA graph
        that every later step replays: recording costs the host one step's launches, where a graph of the whole
        rollout cost it every step's (about a second at 24 steps). The eager step is the rollout's first, written
        and counted as the replays are."""
        with float32_matmuls(self._matmul_precision):
            for _ in range(self.cfg.num_steps_per_env):
                self._graphed("rollout_step", self._rollout_step)
        self.env_steps += self.steps_per_iteration
        self._term_steps += self.cfg.num_steps_per_env

    def _rollout_step(self) -> None:
        """One step of every env, written into the rollout's row ``_row``, then counted; the row moves on."""
        transition = self.runner.step()
        for key in ROLLOUT_KEYS:
            self.rollout.get(key).index_copy_(0, self._row, transition.get(key).unsqueeze(0))
        self._row.add_(1).remainder_(self.cfg.num_steps_per_env)
        self._count_step(transition)

    def update(self) -> TensorDict:
        """The learner's update block on the latest rollout; on CUDA the first call also records it as a graph."""
        with float32_matmuls(self._matmul_precision):
            return self._graphed("update", lambda: self._guard_losses(self.learner.update(self.rollout)))
