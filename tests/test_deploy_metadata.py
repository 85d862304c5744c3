"""A policy file whose deployment metadata is hostile (keys missing, sizes wrong, NaN scales, another version, not
JSON, none at all) is refused when it is opened, with ``MetadataError`` and one line naming the problem, and by
``unilab deploy check`` in that one line with exit status 2 and no traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest

from tests.deploy_policies import export_tiny
from unilab.apps.deploy import main
from unilab.deploy import MetadataError, Policy
from unilab.deploy.schema import METADATA_KEY


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("deploy") / "policy.onnx"
    export_tiny("g1_walk_flat", path)
    return path


def _with_metadata(source: Path, target: Path, text: str | None) -> Path:
    """``source`` with its deployment metadata replaced by ``text`` (None: left out)."""
    model = onnx.load(str(source))
    kept = [(e.key, e.value) for e in model.metadata_props if e.key != METADATA_KEY]
    del model.metadata_props[:]
    for key, value in kept + ([(METADATA_KEY, text)] if text is not None else []):
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(target))
    return target


def _edited(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], str]:
    def edit(document: dict[str, Any]) -> str:
        change(document)
        return json.dumps(document)  # NaN and Infinity as Python writes them: JSON readers take them

    return edit


def _drop(section: str, key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d[section].pop(key)


HOSTILE = {
    "missing-key": (_edited(_drop("joints", "kp")), "deploy.joints.kp is missing"),
    "missing-section": (_edited(lambda d: d.pop("imu")), "deploy.imu is missing"),
    "short-gains": (_edited(lambda d: d["joints"]["kv"].pop()), "deploy.joints.kv has 28 values for 29 joints"),
    "nan-scale": (
        _edited(lambda d: d["observation"][0].update(scale=float("nan"))),
        "deploy.observation[0].scale must be a finite number, got nan",
    ),
    "infinite-gain": (
        _edited(lambda d: d["joints"]["kp"].__setitem__(3, float("inf"))),
        "deploy.joints.kp[3] must be a finite number, got inf",
    ),
    "wrong-width": (
        _edited(lambda d: d["observation"][0].update(width=4)),
        "deploy.observation[0].width is 4; a gyro term has 3",
    ),
    "widths-not-the-network's": (
        _edited(lambda d: d["observation"].pop(0)),
        "its metadata says (batch, 97)",
    ),
    "unknown-kind": (
        _edited(lambda d: d["observation"][0].update(kind="magnetometer")),
        "deploy.observation[0].kind 'magnetometer' is none the runtime builds",
    ),
    "unknown-key": (_edited(lambda d: d["joints"].update(gear=[1.0])), "deploy.joints has unknown key(s) gear"),
    "wrong-type": (_edited(lambda d: d.update(control_dt="20 ms")), "deploy.control_dt must be a finite number"),
    "history": (_edited(lambda d: d.update(history=3)), "deploy.history must be 1 (the runtime stacks no frames)"),
    "bad-threshold": (
        _edited(lambda d: d["check"]["thresholds"].update(fall_rate=["<", 0.05])),
        "deploy.check.thresholds.fall_rate compares with '<'",
    ),
    "newer-version": (_edited(lambda d: d.update(version=2)), "version 2; this runtime reads version 1: update unilab"),
    "older-version": (_edited(lambda d: d.update(version=0)), "version 0; this runtime reads version 1: export"),
    "no-version": (_edited(lambda d: d.pop("version")), "its deploy metadata has no version number"),
    "not-json": (lambda d: "{'joints':", "its deploy metadata is not JSON"),
    "not-an-object": (lambda d: "[1, 2]", "its deploy metadata is not a JSON object"),
}


@pytest.mark.parametrize(("edit", "message"), list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_metadata_is_refused_in_one_line(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture, edit: Callable, message: str
) -> None:
    document = json.loads(onnx_metadata(exported))
    path = _with_metadata(exported, tmp_path / "policy.onnx", edit(document))
    with pytest.raises(MetadataError) as info:
        Policy(path)
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(path)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("unilab deploy check: error: ") and message in err
    assert list(tmp_path.glob("deploy_check_*")) == []  # refused before anything was written


def onnx_metadata(path: Path) -> str:
    return {e.key: e.value for e in onnx.load(str(path)).metadata_props}[METADATA_KEY]


def test_a_policy_exported_before_the_runtime_is_refused_with_what_to_do(exported: Path, tmp_path: Path) -> None:
    path = _with_metadata(exported, tmp_path / "old.onnx", None)
    with pytest.raises(MetadataError, match=r"carries no deploy metadata .*'unilab deploy export --checkpoint"):
        Policy(path)


def test_a_policy_the_check_cannot_run_still_runs_on_the_runtime(
    exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    document = json.loads(onnx_metadata(exported))
    document.update(
        check=None, check_unsupported="its episodes start with event 'x' (y), which the check does not draw"
    )
    path = _with_metadata(exported, tmp_path / "policy.onnx", json.dumps(document))
    assert Policy(path).metadata.check is None
    with pytest.raises(SystemExit):
        main(["check", str(path)])
    assert "the check cannot run this policy: its episodes start with event 'x'" in capsys.readouterr().err


def test_a_scene_that_is_not_the_policy_s_is_refused(exported: Path, tmp_path: Path, capsys) -> None:
    path = tmp_path / "policy.onnx"
    path.write_bytes(exported.read_bytes())
    (tmp_path / "policy.mjb").write_bytes(exported.with_suffix(".mjb").read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(SystemExit):
        main(["check", str(path)])
    assert "is not the scene exported with policy.onnx: export the policy again" in capsys.readouterr().err
    (tmp_path / "policy.mjb").unlink()
    with pytest.raises(SystemExit):
        main(["check", str(path)])
    assert "policy.mjb is not there: export the policy again, or give --scene" in capsys.readouterr().err
