"""Runs the functional env step in place on static buffers: one CUDA graph per step on GPU.

The runner owns the state; each call advances it by one step (policy included, when given) through the env's
donating ``step_entries_`` on the state's entries, so the physics is written straight into the state's tensors, and
returns the transition. On CUDA the whole step is recorded once in a torch CUDA graph and replayed, so a step costs
one graph launch and no host sync. On CPU the same in-place code runs eagerly (optionally through ``torch.compile``),
which is how the CPU tests exercise it.

The returned transition's tensors are rewritten by the next call: consume or copy them
first. Bad actions are counted on device; ``check()`` raises at a host boundary.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from unilab.core.cuda_graphs import record, warm_up
from unilab.core.device import settle
from unilab.core.precompiled import KeptCompile
from unilab.core.rng import advance, make_rng

if TYPE_CHECKING:  # annotations only: the env, and tensordict with torch._dynamo, load when an env is built
    from tensordict import TensorDict

    from unilab.context import Entries
    from unilab.envs.functional import FunctionalEnv

Policy = Callable[["TensorDict"], torch.Tensor]

# What ``health`` returns, since the start: non-finite action rows, diverged envs, and control steps in which the
# contacts or the constraint rows overflowed the physics buffers, a height field's collider dropped contacts, or the
# constraint solver stopped at its iteration limit in some env (a note on accuracy, never an error); then the fullest
# the buffers have been (``SimBackend.peak_tensor``): contacts of all envs together, constraint rows of one env.
HEALTH = (
    "nonfinite_actions",
    "diverged_envs",
    "contact_overflows",
    "constraint_overflows",
    "height_field_overflows",
    "solver_limit_steps",
    "contacts_peak",
    "constraint_rows_peak",
)


_PREV_ACTION = ("env", "prev_action")


class NonFiniteError(ValueError):
    """A NaN or an infinity found on the device during a run, raised at a host boundary: a training run stops on it
    without saving what it touched, in one line."""


class NonFiniteActionError(NonFiniteError):
    """A policy produced NaN or infinite actions (detected on device, raised at a host boundary)."""


class EnvRunner:
    def __init__(
        self,
        env: FunctionalEnv,
        policy: Policy | None = None,
        seed: int = 0,
        capture: bool | None = None,
        compile: bool = False,
        warmup_steps: int = 3,
        precompiled: Path | None = None,
    ) -> None:
        """``policy`` maps the state's observation TensorDict to actions; without one, the
        runner applies ``self.action`` (a static buffer to fill before each call).
        ``capture`` defaults to True on CUDA backends that support graph capture. With ``compile``, ``precompiled``
        names a file to load the compiled step from, or to save it to (``unilab.core.precompiled``): only for the
        exact env, policy and code it is named after."""
        self.env = env
        self.policy = policy
        began = time.perf_counter()
        self.rng = make_rng(seed, env.device)
        self.state = env.reset(self.rng)
        settle(env.device)
        # Seconds of the one-off work done here (Warp kernel loads, compilation, capture), for start-up reports.
        self.startup = {"env_reset": time.perf_counter() - began}
        self.action = torch.zeros(env.num_envs, env.action_dim, device=env.device)
        # The static state's own tensors by key: the compiled step reads these and hands back new values.
        self._entries = env.entries(self.state)
        self._obs_groups = [name for group, name in self._entries if group == "obs"]
        # What is copied back after each step, by dtype (one multi-tensor copy each): everything but the physics,
        # which the step writes in place, and the previous action, copied on its own first.
        written: dict[torch.dtype, list] = {}
        for key, value in self._entries.items():
            if key[0] != "sim" and key != _PREV_ACTION:
                written.setdefault(value.dtype, []).append(key)
        self._written = list(written.values())
        self.kept = (
            KeptCompile(self._advance, precompiled, fullgraph=True) if compile and precompiled is not None else None
        )
        if self.kept is not None:
            self._advance_fn = self.kept
        else:
            self._advance_fn = torch.compile(self._advance, fullgraph=True) if compile else self._advance
        if compile:
            env.sim.begin_kernel_build()  # beside the tracing of the first call, which makes no physics calls
        can_capture = env.device.type == "cuda" and env.sim.capabilities.graph_capturable
        if capture and not can_capture:
            raise ValueError(f"cannot capture a CUDA graph on {env.device} with the {env.sim.name} backend")
        self._graph: torch.cuda.CUDAGraph | None = None
        self._out: TensorDict | None = None
        if capture if capture is not None else can_capture:
            self._capture(warmup_steps)

    def _step_in_place(self) -> TensorDict:
        new, transition = self._advance_fn()
        # The copy into the static state stays outside the compiled step, the previous action first: the step
        # computes it from the static state's action, which the copy then overwrites. Compiled, the copy's order was
        # Inductor's, which read the old action after writing the new one (on CPU and on CUDA).
        self._entries[_PREV_ACTION].copy_(new[_PREV_ACTION])
        for keys in self._written:
            torch._foreach_copy_([self._entries[key] for key in keys], [new[key] for key in keys])
        return self.env.batch(transition)

    def _advance(self) -> tuple[Entries, dict]:
        """The step from the static state, policy included: what ``torch.compile`` compiles. The physics is written
        into the state's own tensors (the step donates them); the other entries come back new, with the transition
        (the observations acted on and the action included, as nested dicts)."""
        rng = advance(self.rng)
        self.rng.copy_(rng)
        obs = {group: self._entries["obs", group].clone() for group in self._obs_groups}  # overwritten after
        action = self.policy(self.env.batch(obs, self.env.device)) if self.policy is not None else self.action
        new, transition = self.env.step_entries_(self._entries, action, rng)
        return new, {**transition, **obs, "action": action}

    def _capture(self, warmup_steps: int) -> None:
        device = self.env.device
        own = torch.cuda.Stream(device)  # this runner's alone: see unilab.core.cuda_graphs
        began = time.perf_counter()
        warm_up(self._step_in_place, own, warmup_steps)  # loads kernels, compiles, fills allocator pools
        settle(device)
        captured = time.perf_counter()
        self._graph, self._out = record(self._step_in_place, own)
        settle(device)
        self.startup.update(env_warmup=captured - began, env_capture=time.perf_counter() - captured)
        kept = self.kept_split()
        self.startup.update(kept)
        self.startup["env_warmup"] -= sum(kept.values())

    def kept_split(self) -> dict[str, float]:
        """The kept step's load, or its compile and save, as a start-up part (``env_step_loaded`` or
        ``env_step_saved``); empty where the step is not kept or has not been called yet. A captured runner reports it
        in ``startup``; an uncaptured one first steps inside its trainer's first iteration, which reports it."""
        if self.kept is None or self.kept.outcome is None:
            return {}
        return {f"env_step_{self.kept.outcome}": self.kept.seconds}

    @property
    def graph(self) -> torch.cuda.CUDAGraph | None:
        """The recorded env step (None until captured, or where nothing is), for profilers."""
        return self._graph

    def reset(self, seed: int) -> None:
        """Back to the state a new runner with ``seed`` starts from, in place, so a captured graph stays valid."""
        self.rng.copy_(make_rng(seed, self.env.device))
        self.state.update_(self.env.reset(self.rng))

    def step(self) -> TensorDict:
        """Advance every env by one control step; returns the transition (static buffers on CUDA)."""
        if self._graph is None:
            return self._step_in_place()
        self._graph.replay()
        return self._out

    def health(self) -> dict[str, torch.Tensor]:
        """The ``HEALTH`` counters by name, as 0-d int64 tensors on the env device copied from the live ones: taking
        them queues a copy and waits for nothing, so a log point can take them and hand them, read to the host, to
        ``check`` once later work is queued."""
        counts = torch.stack([self.state["task", "nonfinite_actions"], self.state["task", "diverged_envs"]]).long()
        sim = self.env.sim
        counts = torch.cat(
            [
                counts,
                sim.overflow_tensor().to(self.env.device),
                sim.solver_limit_tensor().to(self.env.device).reshape(1),
                sim.peak_tensor().to(self.env.device),
            ]
        )
        return dict(zip(HEALTH, counts.unbind(), strict=True))

    def check(self, health: Mapping[str, int] | None = None) -> None:
        """Host boundary: raise on non-finite actions or physics buffer overflow since the start.

        ``health`` is an earlier ``health()`` read to the host, name -> count; default: read it now (waits for the
        device).
        Diverged envs raise nothing: the env has reset them, and the count is reported.
        """
        if health is None:  # one read of them all
            health = dict(zip(HEALTH, torch.stack(list(self.health().values())).tolist(), strict=True))
        bad = health["nonfinite_actions"]
        if bad:
            raise NonFiniteActionError(f"{bad} env-step rows had non-finite actions (replaced by zeros)")
        self.env.sim.check_capacity(
            {
                "contacts": health["contact_overflows"],
                "constraints": health["constraint_overflows"],
                "height_field": health["height_field_overflows"],
            }
        )
