"""How a term's result enters the state: ``apply_updates`` copies, and a manager copies once per call and then writes
its terms' results in turn into that copy, which every later term reads; the state it was given is never changed."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from tensordict import TensorDict

from unilab.context import apply_updates, write_updates
from unilab.core.rng import make_rng
from unilab.managers.managers import CurriculumManager, EventManager
from unilab.managers.terms import CurriculumTerm, EventTerm

N = 3
CTX = SimpleNamespace(num_envs=N, device=torch.device("cpu"), dt=0.02)


def make_state() -> TensorDict:
    return TensorDict(
        {"env": TensorDict({"a": torch.zeros(N), "b": torch.zeros(N), "push_timer": torch.ones(N)}, batch_size=[N])},
        batch_size=[N],
    )


def entries(state: TensorDict) -> dict:
    """Each entry's tensor object and values, to tell a replaced entry and a written tensor apart."""
    return {key: (id(value), value.clone()) for key, value in state.items(include_nested=True, leaves_only=True)}


def same(state: TensorDict, before: dict) -> bool:
    now = entries(state)
    return now.keys() == before.keys() and all(
        now[k][0] == before[k][0] and torch.equal(now[k][1], before[k][1]) for k in now
    )


def test_apply_updates_copies_and_keeps_the_unmasked_rows() -> None:
    state = make_state()
    before = entries(state)
    mask = torch.tensor([True, False, True])
    out = apply_updates(state, {("env", "a"): torch.full((N,), 5.0)}, mask)
    assert same(state, before)
    assert torch.equal(out["env", "a"], torch.tensor([5.0, 0.0, 5.0])) and out["env", "b"] is state["env", "b"]
    write_updates(out, {("env", "b"): torch.full((N,), 2.0)})  # into the copy only
    assert same(state, before) and torch.equal(out["env", "b"], torch.full((N,), 2.0))


def test_reset_events_each_see_the_ones_before_and_leave_the_copied_state_alone() -> None:
    def first(state, ctx, mask, rng):
        return {("env", "a"): state["env", "a"] + 1.0}

    def second(state, ctx, mask, rng):  # reads what ``first`` wrote
        return {("env", "b"): state["env", "a"] * 10.0}

    def push(state, ctx, mask, rng):
        return {("env", "a"): state["env", "a"] - 100.0}

    events = EventManager(
        {"first": EventTerm(first), "second": EventTerm(second), "push": EventTerm(push, interval_s=(0.5, 1.0))}
    )
    state = make_state()
    before = entries(state)
    mask = torch.tensor([True, True, False])
    out = state.clone(False)
    events.reset_(out, CTX, mask, make_rng(0))
    assert same(state, before)
    assert torch.equal(out["env", "a"], torch.tensor([1.0, 1.0, 0.0]))
    assert torch.equal(out["env", "b"], torch.tensor([10.0, 10.0, 0.0]))
    timer = out["env", "push_timer"]  # drawn anew in the reset envs only
    assert ((timer[:2] >= 0.5) & (timer[:2] <= 1.0)).all() and timer[2] == 1.0

    fired = apply_updates(out, {("env", "push_timer"): torch.tensor([0.01, 0.5, 0.01])})
    before = entries(fired)
    pushed = fired.clone(False)
    events.interval_(pushed, CTX, make_rng(1))
    assert same(fired, before)
    assert torch.equal(pushed["env", "a"], torch.tensor([-99.0, 1.0, -100.0]))  # the envs whose timer ran out


def test_curriculum_terms_update_in_turn_without_touching_the_copied_state() -> None:
    def count(state, ctx, done, terminated):
        return {("env", "a"): state["env", "a"] + done.float()}

    def copy(state, ctx, done, terminated):
        return {("env", "b"): state["env", "a"].clone()}

    curricula = CurriculumManager({"count": CurriculumTerm(count, {}), "copy": CurriculumTerm(copy, {})})
    state = make_state()
    before = entries(state)
    done = torch.tensor([True, False, True])
    out = state.clone(False)
    curricula.update_(out, CTX, done, done)
    assert same(state, before)
    assert torch.equal(out["env", "b"], torch.tensor([1.0, 0.0, 1.0]))
