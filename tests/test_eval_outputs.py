"""No eval result is lost: each checkpoint and suite has its own summary, an earlier one is replaced only on
request, and two evals at once cannot both write one file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_eval import tiny_run  # noqa: F401  (the fixture)

from unilab.apps.eval import main, summary_name
from unilab.apps.outputs import PLACEHOLDER

FAST = ["--num-envs", "2", "--episode-s", "0.1"]


@pytest.fixture
def run_copy(tiny_run: Path, tmp_path: Path) -> Path:  # noqa: F811
    """The tiny run's checkpoints in a directory of this test's own."""
    copy = tmp_path / "run"
    copy.mkdir()
    for name in ("model_2.pt", "model_3.pt"):
        shutil.copy(tiny_run / name, copy / name)
    return copy


def test_two_checkpoints_of_a_run_keep_two_summaries(run_copy: Path) -> None:
    for name in ("model_2.pt", "model_3.pt"):
        main(["--checkpoint", str(run_copy / name), *FAST])
    iterations = {
        json.loads((run_copy / summary_name(name)).read_text())["iteration"] for name in ("model_2", "model_3")
    }
    assert iterations == {2, 3}


def test_an_earlier_summary_is_replaced_only_with_force(run_copy: Path, capsys: pytest.CaptureFixture) -> None:
    checkpoint = str(run_copy / "model_3.pt")
    main(["--checkpoint", checkpoint, *FAST, "--seed", "1"])
    capsys.readouterr()  # the first eval's output; the second's refusal is read below
    target = run_copy / summary_name("model_3.pt")
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", checkpoint, *FAST, "--seed", "2"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.splitlines() == [
        f"unilab eval: error: {target} already exists: --force replaces it"
    ]
    assert json.loads(target.read_text())["seed"] == 1  # refused before any work: the first result stands
    main(["--checkpoint", checkpoint, *FAST, "--seed", "2", "--force"])
    assert json.loads(target.read_text())["seed"] == 2


def test_a_summary_another_eval_is_writing_is_refused(run_copy: Path, capsys: pytest.CaptureFixture) -> None:
    """A concurrent eval has taken the name (its placeholder is there): this one must not race it."""
    target = run_copy / summary_name("model_3.pt", "push")
    target.write_bytes(PLACEHOLDER)
    with pytest.raises(SystemExit) as exit_info:
        main(["--checkpoint", str(run_copy / "model_3.pt"), *FAST, "--suite", "nominal", "push"])
    assert exit_info.value.code == 2 and f"{target} already exists" in capsys.readouterr().err
    assert not (run_copy / summary_name("model_3.pt")).exists()  # nothing taken, nothing left behind


def test_a_failed_eval_leaves_no_placeholder(run_copy: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(run_copy / "model_3.pt"), *FAST, "--task", "g1_motion_tracking"])
    assert "does not fit g1_motion_tracking" in capsys.readouterr().err
    assert sorted(path.name for path in run_copy.iterdir()) == ["model_2.pt", "model_3.pt"]


def test_an_eval_on_task_knobs_keeps_a_summary_of_its_own(run_copy: Path) -> None:
    """The same checkpoint judged on a variant of its task and then on its own: two summaries, neither refused."""
    checkpoint = str(run_copy / "model_3.pt")
    varied = main(["--checkpoint", checkpoint, *FAST, "--knobs", "task.noise_scale=0.5"])
    plain = main(["--checkpoint", checkpoint, *FAST])
    assert Path(varied["summary_path"]).name == summary_name("model_3.pt", knobs={"noise_scale": 0.5})
    assert Path(varied["summary_path"]).name.startswith("eval_summary_model_3_knobs-")
    assert Path(plain["summary_path"]).name == summary_name("model_3.pt")
    assert json.loads(Path(varied["summary_path"]).read_text())["knob_overrides"] == {"noise_scale": 0.5}
    assert json.loads(Path(plain["summary_path"]).read_text())["knob_overrides"] == {}
    assert summary_name("model_3.pt", knobs={"noise_scale": 0.25}) != Path(varied["summary_path"]).name
