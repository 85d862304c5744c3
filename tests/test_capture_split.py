"""A recorded graph's first call, split into start-up parts: its eager call and its recording."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from unilab.train import loop
from unilab.train.loop import Trainer


class _Graph:
    def __init__(self) -> None:
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1


class _Runner:
    """Stands in for an uncaptured runner whose kept step loads at its first call (``kept_split``)."""

    def __init__(self) -> None:
        self.loaded: dict[str, float] = {}

    def kept_split(self) -> dict[str, float]:
        return dict(self.loaded)


def _trainer() -> Trainer:
    trainer = Trainer()
    trainer.capture, trainer.device, trainer.runner = True, torch.device("cpu"), _Runner()
    trainer._graphs, trainer._graph_out, trainer.capture_split = {}, {}, {}
    trainer._capture_stream = None
    return trainer


def test_a_graph_s_first_call_is_split_into_its_eager_call_and_its_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, graph, now = _trainer(), _Graph(), [100.0]

    def warm_up(fn, stream):
        trainer.runner.loaded = {"env_step_loaded": 0.2}  # the step's load, inside the eager call
        now[0] += 0.5
        return fn()

    def record(fn, stream, generators):
        now[0] += 0.125
        return graph, fn()

    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(loop, "warm_up", warm_up)
    monkeypatch.setattr(loop, "record", record)
    monkeypatch.setattr(loop, "settle", lambda device: None)
    assert trainer._graphed("rollout", lambda: "out") == "out"
    # The step's 0.2 s is reported on its own (``env_step_loaded``), so the eager part leaves it out.
    assert trainer.take_capture_split() == {"rollout_eager": pytest.approx(0.3), "rollout_capture": 0.125}
    # Taken once: the next iteration's split is empty, and a replay adds nothing.
    assert trainer._graphed("rollout", lambda: "out") == "out" and graph.replays == 1
    assert trainer.take_capture_split() == {}


def test_nothing_is_split_where_nothing_is_recorded() -> None:
    trainer = _trainer()
    trainer.capture = False
    assert trainer._graphed("update", lambda: "out") == "out"
    assert trainer.take_capture_split() == {}
