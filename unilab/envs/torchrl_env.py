"""The TorchRL face of a functional env: an ``EnvBase`` with specs, masked reset and seeding.

Keys: ``"policy"`` (actor observation), ``"critic"`` (privileged critic observation),
``"action"`` in [-1, 1], ``"reward"``, ``"done"``/``"terminated"``/``"truncated"`` (all
``(num_envs, 1)``). ``("next", obs)`` after a step is the true terminal observation of
envs that just ended; the functional core has already reset them, so the ``_reset`` that
TorchRL issues for those envs returns their cached first observation without more physics.

This eager path checks actions on the host and raises on non-finite rows; training uses
the graph-captured runner, which counts them on device instead.

It steps with the functional env's pure ``step``, so a state it has passed through is
never written again: ``get_state()`` is a snapshot (the functional state, the RNG and
which envs were just auto-reset) and ``set_state(snapshot)`` continues from it, as often
as wanted. Stepping on from the same snapshot with the same actions gives the same
results; two snapshots evolve independently.
"""

from __future__ import annotations

import mujoco
import torch
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase

from unilab.core.rng import advance, make_rng
from unilab.envs.functional import FunctionalEnv


class UniLabEnv(EnvBase):
    def __init__(self, core: FunctionalEnv, seed: int = 0) -> None:
        n = core.num_envs
        super().__init__(device=core.device, batch_size=torch.Size([n]))
        self.core = core
        self._rng = make_rng(seed, core.device)
        self._state: TensorDict | None = None
        self._pending = torch.zeros(n, dtype=torch.bool, device=core.device)
        self.observation_spec = Composite(
            {group: Unbounded((n, dim), device=core.device) for group, dim in core.obs_dims.items()},
            shape=(n,),
            device=core.device,
        )
        self.action_spec = Bounded(-1.0, 1.0, (n, core.action_dim), device=core.device)
        self.reward_spec = Unbounded((n, 1), device=core.device)
        self.done_spec = Composite(
            {
                k: Categorical(2, (n, 1), dtype=torch.bool, device=core.device)
                for k in ("done", "terminated", "truncated")
            },
            shape=(n,),
            device=core.device,
        )

    @property
    def mj_model(self) -> mujoco.MjModel:
        """The scene the envs run, as a C ``MjModel`` (its terrain included): for renderers, viewers and
        ``mujoco.MjData`` of one's own. Shared with the backend: copy it before changing it."""
        return self.core.sim.model

    @property
    def state(self) -> TensorDict | None:
        """The functional state of the last step or reset (never written afterwards)."""
        return self._state

    def get_state(self) -> TensorDict:
        """A snapshot to hand to ``set_state``: the functional state, the RNG and the pending auto-resets."""
        if self._state is None:
            raise RuntimeError("call reset() before get_state()")
        return TensorDict({"core": self._state, "rng": self._rng, "pending": self._pending}, batch_size=[])

    def set_state(self, snapshot: TensorDictBase) -> TensorDictBase:
        """Continue from a ``get_state`` snapshot; returns its observation, as ``reset`` would, to start a rollout
        from (``env.rollout(n, auto_reset=False, tensordict=td)``)."""
        missing = [key for key in ("core", "rng", "pending") if key not in snapshot]
        if missing:
            raise ValueError(f"not an env snapshot: it has no {missing} (take one with get_state())")
        core = snapshot["core"]
        if core["obs", "policy"].shape != (self.core.num_envs, self.core.obs_dims["policy"]):
            raise ValueError(f"snapshot is of another env: policy observation {tuple(core['obs', 'policy'].shape)}")
        self._state, self._rng, self._pending = core, snapshot["rng"], snapshot["pending"]
        no = torch.zeros(self.batch_size, dtype=torch.bool, device=self.device)
        return TensorDict({**core["obs"].to_dict(), **self._flags(no, no, no)}, batch_size=self.batch_size)

    def _next_rng(self) -> torch.Tensor:
        self._rng = advance(self._rng)
        return self._rng

    def _flags(self, done: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> dict:
        return {
            "done": done.unsqueeze(-1),
            "terminated": terminated.unsqueeze(-1),
            "truncated": truncated.unsqueeze(-1),
        }

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if self._state is None or mask is None:
            self._state = self.core.reset(self._next_rng())
            self._pending = torch.zeros_like(self._pending)
        else:
            mask = mask.reshape(self.batch_size)
            # Envs that ended at the last step were reset inside it; reset only the others.
            self._state = self.core.reset_where(self._state, mask & ~self._pending, self._next_rng())
            self._pending = self._pending & ~mask
        obs = self._state["obs"]
        no = torch.zeros(self.batch_size, dtype=torch.bool, device=self.device)
        return TensorDict({**obs.to_dict(), **self._flags(no, no, no)}, batch_size=self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        action = tensordict.get("action")
        bad = ~torch.isfinite(action).all(dim=-1)
        if bad.any():
            raise ValueError(f"non-finite action in env rows {bad.nonzero().flatten().tolist()}")
        self._state, transition = self.core.step(self._state, action, self._next_rng())
        nxt = transition["next"]
        self._pending = nxt["done"]
        return TensorDict(
            {
                **{group: nxt[group] for group in self.core.obs_dims},
                "reward": nxt["reward"].unsqueeze(-1),
                **self._flags(nxt["done"], nxt["terminated"], nxt["truncated"]),
            },
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed: int | None) -> None:
        self._rng = make_rng(0 if seed is None else seed, self.device)
