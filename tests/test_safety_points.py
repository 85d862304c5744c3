"""The smaller run-safety points: a tuning file with a Python tag, a task without mirror maps, a viewer served beyond
the machine and a summary whose status no run writes, each a line, never a traceback or a silent guess."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_train import tiny

from unilab.apps.compose import compose_config
from unilab.apps.train import main, run
from unilab.apps.view import exposure_warning
from unilab.managers.terms import ObsTerm
from unilab.tasks import registry

QUIET = ["training.export_onnx=false"]


def test_a_python_tag_in_a_tuning_file_is_one_line_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    marker = tmp_path / "ran"
    tuning = tmp_path / "sac.yaml"
    tuning.write_text(f'lr: !!python/object/apply:os.system ["touch {marker}"]\n')
    monkeypatch.setattr(registry, "_registered", {})
    registry.register_task("g1_walk_tagged", registry.get_task("g1_walk_flat").make_config, tuning={"sac": tuning})
    with pytest.raises(SystemExit) as exit_info:
        main([*tiny(tmp_path, "mujoco"), "task=g1_walk_tagged"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert f"{tuning}: not a plain YAML file of settings: could not determine a constructor for the tag" in err
    assert "(line 1)" in err and not marker.exists()


def _register_unmirrored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flat walk with one more policy observation term that declares no mirror map."""
    monkeypatch.setattr(registry, "_registered", {})
    base = registry.get_task("g1_walk_flat").make_config

    def unmirrored(**kwargs):
        config = base(**kwargs)
        extra = ObsTerm(lambda state, ctx: state["env", "episode_step"].float().unsqueeze(-1))
        policy = {**config.observations["policy"], "clock": extra}
        return dataclasses.replace(config, observations={**config.observations, "policy": policy})

    registry.register_task("g1_walk_unmirrored", unmirrored)


def test_a_term_without_a_mirror_map_trains_without_mirroring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _register_unmirrored(monkeypatch)
    overrides = tiny(tmp_path, "mujoco", "task=g1_walk_unmirrored", "algo.use_symmetry=false", "algo.max_iterations=2")
    assert run(compose_config([*overrides, *QUIET])).status == "completed"


def test_mirroring_a_task_without_every_mirror_map_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _register_unmirrored(monkeypatch)
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", "task=g1_walk_unmirrored", "algo.use_symmetry=true", *QUIET))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert err.splitlines()[-1] == (
        "train: error: algo.use_symmetry needs a task that declares left-right mirror maps for its action and every "
        "observation term; this one does not"
    )


@pytest.mark.parametrize(
    ("host", "warned"),
    [
        ("127.0.0.1", False),
        ("::1", False),
        ("localhost", False),
        ("0.0.0.0", True),
        ("192.168.1.5", True),
        ("example.org", True),
    ],
)
def test_a_viewer_served_beyond_this_machine_is_said_so(host: str, warned: bool) -> None:
    warning = exposure_warning(host, 8080)
    assert (warning is not None) == warned
    if warned:
        assert warning.startswith(f"viewer: warning: --host {host} serves the page beyond this machine")


@pytest.mark.parametrize("status", ["exploded", None])
def test_a_summary_with_a_status_no_run_writes_is_not_resumed_in_place(
    tmp_path: Path, capsys, status: str | None
) -> None:
    main(tiny(tmp_path, "mujoco", "algo.max_iterations=10", *QUIET))
    run_dir = tmp_path / "run"
    summary = json.loads((run_dir / "run_summary.json").read_text())
    (run_dir / "run_summary.json").write_text(json.dumps({**summary, "status": status}))
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", "algo.max_iterations=20", f"algo.resume={run_dir / 'model_10.pt'}", *QUIET))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert f"its run_summary.json has status {status!r}, not one of a run that stopped short" in err
