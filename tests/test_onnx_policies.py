"""An ONNX policy is checked for the interface ``train`` exports (names, dtypes, a free batch, the task's widths)
before any rollout, and one that gives non-finite actions is counted and fails the verdict."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from unilab.apps.eval import main
from unilab.apps.policy import policy_source

OBS, ACT = 100, 29  # g1_walk_flat's policy observation and action widths
FAST = ["--task", "g1_walk_flat", "--num-envs", "2", "--episode-s", "0.1"]


def _policy(
    path: Path,
    inputs: list[tuple[str, int, list]] | None = None,
    output: tuple[str, int, list] = ("action", TensorProto.FLOAT, ["batch", ACT]),
    scale: float = 0.0,
) -> Path:
    """A linear policy ``action = float(obs) @ W * scale`` with the given ports (name, element type, shape)."""
    inputs = inputs or [("obs", TensorProto.FLOAT, ["batch", OBS])]
    weight = numpy_helper.from_array(np.full((OBS, ACT), 0.01, dtype=np.float32), "W")
    factor = numpy_helper.from_array(np.array(scale, dtype=np.float32), "scale")
    nodes = [
        helper.make_node("Cast", [inputs[0][0]], ["obs_float"], to=TensorProto.FLOAT),
        helper.make_node("MatMul", ["obs_float", "W"], ["linear"]),
        helper.make_node("Mul", ["linear", "scale"], [output[0]]),
    ]
    graph = helper.make_graph(
        nodes,
        "policy",
        [helper.make_tensor_value_info(name, kind, shape) for name, kind, shape in inputs],
        [helper.make_tensor_value_info(*output)],
        initializer=[weight, factor],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def _refused(capsys: pytest.CaptureFixture, path: Path) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["--onnx", str(path), *FAST])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("ports", "message"),
    [
        ({"inputs": [("x", TensorProto.FLOAT, ["batch", OBS])]}, "has inputs ['x']; a policy has one input, 'obs'"),
        (
            {"inputs": [("obs", TensorProto.FLOAT, ["batch", OBS]), ("extra", TensorProto.FLOAT, ["batch", 1])]},
            "has inputs ['obs', 'extra']",
        ),
        ({"inputs": [("obs", TensorProto.FLOAT, [1, OBS])]}, "its input 'obs' has a fixed batch of 1"),
        ({"inputs": [("obs", TensorProto.FLOAT, [OBS])]}, "its input 'obs' has shape [100], not (batch, 100)"),
        ({"inputs": [("obs", TensorProto.DOUBLE, ["batch", OBS])]}, "its input 'obs' is tensor(double)"),
        ({"output": ("act", TensorProto.FLOAT, ["batch", ACT])}, "has outputs ['act']; a policy has one output"),
    ],
    ids=["input-name", "extra-input", "fixed-batch", "no-batch-axis", "double", "output-name"],
)
def test_an_onnx_policy_of_another_interface_is_refused_before_any_rollout(
    tmp_path: Path, capsys: pytest.CaptureFixture, ports: dict, message: str
) -> None:
    assert message in _refused(capsys, _policy(tmp_path / "policy.onnx", **ports))
    assert list(tmp_path.glob("eval_summary*")) == []  # nothing written, no placeholder left


def test_an_onnx_policy_giving_nan_is_counted_and_fails_the_verdict(tmp_path: Path, capsys) -> None:
    path = _policy(tmp_path / "policy.onnx", scale=float("nan"))
    result = main(["--onnx", str(path), *FAST])
    out = capsys.readouterr().out
    steps = json.loads((tmp_path / "eval_summary_policy.json").read_text())
    assert result["nonfinite_actions"] == steps["nonfinite_actions"] > 0
    assert result["meets_thresholds"] is False and "had non-finite actions" in out


def test_a_finite_onnx_policy_counts_none(tmp_path: Path) -> None:
    result = main(["--onnx", str(_policy(tmp_path / "policy.onnx")), *FAST])
    assert result["nonfinite_actions"] == 0


def _with_task(path: Path, knobs: str) -> Path:
    model = onnx.load(path)
    for key, value in {"task": "g1_walk_flat", "motion_file": "", "task_knobs": knobs}.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, path)
    return path


def test_an_onnx_policy_runs_on_the_task_its_knobs_made(tmp_path: Path) -> None:
    path = _with_task(_policy(tmp_path / "policy.onnx"), json.dumps({"noise_scale": 2.0}))
    assert policy_source(None, path, None).overrides == {"obs_noise": False, "noise_scale": 2.0}


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ("{not json", "its task_knobs metadata is not a JSON object"),
        ("[1, 2]", "its task_knobs metadata is not a JSON object"),
        ('{"falls": "trunk"}', "task.falls does not apply to task 'g1_walk_flat'"),
        ('{"noise_scale": 1e9}', "task.noise_scale must be in [0, 10]"),
    ],
    ids=["not-json", "not-an-object", "foreign-knob", "out-of-range"],
)
def test_an_onnx_policy_s_hostile_task_knobs_are_one_line(
    knobs: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    path = _with_task(_policy(tmp_path / "policy.onnx"), knobs)
    with pytest.raises(SystemExit) as exit_info:
        main(["--onnx", str(path), "--num-envs", "2", "--episode-s", "0.1"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and message in err, err
