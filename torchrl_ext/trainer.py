"""Off-policy SAC trainer over the functional env: one env step of every env, then the updates.

Schedule (the same for every reported figure): iteration i steps all envs with the current
policy (one captured graph on CUDA), appends the transitions to the replay buffer, then
runs ``updates_per_step`` minibatch updates (critic every update, actor and temperature
every ``policy_frequency``-th, Polyak after each) on a sample drawn once for the whole
iteration. No policy lag: the env step of i+1 waits for the updates of i.

On CUDA the update block (sampling included) is recorded once as a CUDA graph and
replayed; indices are drawn on device against a device-side buffer size, so nothing in
an iteration reads back to the host. Metrics stay on device until ``read_metrics``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.data import ReplayBuffer, TensorStorage
from torchrl.data.replay_buffers.writers import RoundRobinWriter

from torchrl_ext.config import AlgoConfig
from torchrl_ext.networks import Actor, EnsembleCritic
from torchrl_ext.sac import Mirror, SACLoss, Symmetry, make_optimizers, target_entropy_from_ratio
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner

TRANSITION_KEYS = (
    "policy",
    "critic",
    "action",
    ("next", "policy"),
    ("next", "critic"),
    ("next", "reward"),
    ("next", "terminated"),
    ("next", "truncated"),
)


def _symmetry(env: FunctionalEnv, device: torch.device) -> Symmetry:
    maps = env.mirrors()

    def mirror(name: str) -> Mirror:
        m = maps[name]
        return Mirror(torch.tensor(m.index, device=device), torch.tensor(m.sign, device=device))

    return Symmetry(mirror("policy"), mirror("critic"), mirror("action"))


@dataclass
class IterationTimer:
    """Wall time per completed iteration, resolved lazily so no iteration waits on the GPU.

    On CUDA an event is recorded at the end of each iteration; the time of iteration i is
    the GPU-timeline gap between the ends of i-1 and i, read after a sync at a log point.
    """

    device: torch.device

    def __post_init__(self) -> None:
        self._last: torch.cuda.Event | float | None = None
        self._pending: list[tuple[object, object]] = []

    def _mark(self):
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def start(self) -> None:
        self._last = self._mark()
        self._pending.clear()

    def lap(self) -> None:
        mark = self._mark()
        self._pending.append((self._last, mark))
        self._last = mark

    def drain(self) -> Iterator[float]:
        """Seconds of each iteration since the last drain (syncs once on CUDA)."""
        if self.device.type == "cuda" and self._pending:
            self._pending[-1][1].synchronize()
        for begin, end in self._pending:
            yield begin.elapsed_time(end) / 1000.0 if self.device.type == "cuda" else end - begin
        self._pending.clear()


class SACTrainer:
    def __init__(self, env: FunctionalEnv, cfg: AlgoConfig) -> None:
        self.env = env
        self.cfg = cfg
        dev = self.device = env.device
        obs_dim, critic_dim, act_dim = env.obs_dims["policy"], env.obs_dims["critic"], env.action_dim
        actor = Actor(obs_dim, act_dim, tuple(cfg.actor_hidden), normalize_obs=cfg.obs_normalization)
        critic = EnsembleCritic(
            critic_dim,
            act_dim,
            tuple(cfg.critic_hidden),
            num_atoms=cfg.num_atoms,
            v_min=cfg.v_min,
            v_max=cfg.v_max,
            normalize_obs=cfg.obs_normalization,
        )
        self.loss = SACLoss(
            actor.to(dev),
            critic.to(dev),
            target_entropy=target_entropy_from_ratio(act_dim, cfg.target_entropy_ratio),
            gamma=cfg.gamma,
            tau=cfg.tau,
            alpha_init=cfg.alpha_init,
            mirror=_symmetry(env, dev) if cfg.use_symmetry else None,
        ).to(dev)
        self.optim = make_optimizers(self.loss, lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.amp = cfg.amp and dev.type == "cuda"
        self.capture = dev.type == "cuda" and env.sim.capabilities.graph_capturable
        # With symmetry the loss doubles each minibatch with its mirror image.
        self.minibatch = cfg.batch_size // 2 if cfg.use_symmetry else cfg.batch_size
        self.runner = EnvRunner(env, self._explore, seed=cfg.seed, capture=self.capture)
        self.capacity = cfg.replay_buffer_n * env.num_envs
        self._memory: TensorDict | None = None
        self.replay: ReplayBuffer | None = None
        self.filled = 0
        self._size = torch.zeros((), device=dev)
        self._update_graph: torch.cuda.CUDAGraph | None = None
        self._update_out: TensorDict | None = None
        self.iteration = 0
        self.env_steps = 0  # every transition collected, replay pre-fill included
        n = env.num_envs
        self._episode_return = torch.zeros(n, device=dev)
        self._episodes = TensorDict(
            {
                "count": torch.zeros((), device=dev),
                "return": torch.zeros((), device=dev),
                "length": torch.zeros((), device=dev),
            },
            batch_size=[],
        )

    # -- acting --------------------------------------------------------------------------

    @torch.no_grad()
    def _explore(self, obs: TensorDict) -> torch.Tensor:
        action, _ = self.loss.actor.sample(obs["policy"])
        return action

    def collect(self) -> None:
        """One env step of every env into the replay buffer, plus running episode statistics."""
        transition = self.runner.step()
        self.env_steps += self.env.num_envs
        data = transition.select(*TRANSITION_KEYS)
        if self.replay is None:
            self._memory = data[0].expand(self.capacity).clone().zero_()
            self.replay = ReplayBuffer(storage=TensorStorage(self._memory), writer=RoundRobinWriter(), batch_size=1)
        self.replay.extend(data)
        # A TensorStorage over preallocated memory reports itself full; count the rows written instead.
        self.filled = min(self.filled + self.env.num_envs, self.capacity)
        self._size.fill_(self.filled)
        if self.cfg.obs_normalization:
            self.loss.update_normalizers(data)
        done = transition["next", "done"]
        self._episode_return += transition["next", "reward"]
        finished = done.float()
        self._episodes["count"] += finished.sum()
        self._episodes["return"] += (self._episode_return * finished).sum()
        self._episodes["length"] += (transition["episode_length"].float() * finished).sum()
        self._episode_return *= 1.0 - finished

    @property
    def ready(self) -> bool:
        """Enough data for updates: max(batch, learning_starts * num_envs) rows (TASKS.md 3.1)."""
        return self.filled >= max(self.cfg.batch_size, self.cfg.learning_starts * self.env.num_envs)

    # -- learning ------------------------------------------------------------------------

    def sample_indices(self, count: int) -> torch.Tensor:
        """Uniform rows with replacement among those written, drawn on device against a device-side size."""
        return (torch.rand(count, device=self.device) * self._size).long()

    def _descend(self, optimizer: torch.optim.Optimizer, value: torch.Tensor, net: nn.Module | None = None) -> None:
        """One gradient step; gradients of ``net`` are clipped when ``max_grad_norm`` is set."""
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        if net is not None and self.cfg.max_grad_norm > 0:
            torch.nn.utils.clip_grad_norm_(net.parameters(), self.cfg.max_grad_norm)
        optimizer.step()

    def _update_block(self) -> TensorDict:
        cfg, opt, loss = self.cfg, self.optim, self.loss
        n, u = self.minibatch, cfg.updates_per_step
        batch = self._memory[self.sample_indices(n * u)]
        out = {}
        for i in range(u):
            mb = batch[i * n : (i + 1) * n]
            with torch.autocast(self.device.type, torch.bfloat16, enabled=self.amp):
                critic = loss.critic_loss(mb)
            self._descend(opt.critic, critic["loss_critic"], loss.critic)
            out.update(loss_critic=critic["loss_critic"].detach(), q_mean=critic["q_mean"].detach())
            if i % cfg.policy_frequency == 0:
                with torch.autocast(self.device.type, torch.bfloat16, enabled=self.amp):
                    actor = loss.actor_loss(mb)
                self._descend(opt.actor, actor["loss_actor"], loss.actor)
                alpha = loss.alpha_loss(actor["log_prob"])
                self._descend(opt.alpha, alpha["loss_alpha"])
                out.update(loss_actor=actor["loss_actor"].detach(), entropy=actor["entropy"].detach())
                out.update(loss_alpha=alpha["loss_alpha"].detach(), alpha=loss.alpha.detach())
            loss.update_target()
        return TensorDict(out, batch_size=[])

    def update(self) -> TensorDict:
        """``updates_per_step`` updates; the first call also records them as a CUDA graph."""
        if not self.capture:
            return self._update_block()
        if self._update_graph is None:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):  # this warm-up is the first iteration's real update
                out = self._update_block()
            torch.cuda.current_stream(self.device).wait_stream(side)
            self._update_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._update_graph):
                self._update_out = self._update_block()
            return out
        self._update_graph.replay()
        return self._update_out

    # -- host boundary -------------------------------------------------------------------

    def read_episodes(self) -> dict[str, float]:
        """Mean return and length of episodes finished since the last read (syncs)."""
        count, total_return, total_length = (float(v) for v in self._episodes.values())
        self._episodes.zero_()
        if count == 0:
            return {}
        return {"episode_return": total_return / count, "episode_length": total_length / count, "episodes": count}

    def state_dict(self) -> dict:
        return {
            "loss": self.loss.state_dict(),
            "optim": {name: opt.state_dict() for name, opt in self.optim._asdict().items()},
            "iteration": self.iteration,
        }

    def load_state_dict(self, state: dict) -> None:
        self.loss.load_state_dict(state["loss"])
        for name, opt in self.optim._asdict().items():
            opt.load_state_dict(state["optim"][name])
        self.iteration = int(state["iteration"])
