"""`plot_curves --series`: an eval series against training time, and one-line errors for what is not one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unilab.apps import curves


def write_series(path: Path, suite: str, errors: list[float], **extra: str) -> Path:
    results = [
        {"suite": suite, "train_wall_time_sec": 60.0 * (k + 1), "fall_rate": 0.0, "lin_vel_error": err, **extra}
        for k, err in enumerate(errors)
    ]
    thresholds = {"fall_rate": ["<=", 0.05], "lin_vel_error": ["<=", 0.25]}
    path.write_text(json.dumps({"thresholds": thresholds, "results": results, "first_meeting_thresholds": None}))
    return path


def test_series_of_several_suites_make_one_png(tmp_path: Path) -> None:
    nominal = write_series(tmp_path / "eval_series.json", "nominal", [0.3, 0.2, 0.15])
    push = write_series(tmp_path / "eval_series_push.json", "push", [0.35, 0.22, 0.18])
    assert curves.read_series(push)["suite"] == "push"
    spread = write_series(tmp_path / "eval_series_slope.json", "slope", [0.3], rows="all")
    top = write_series(tmp_path / "eval_series_slope_top.json", "slope", [0.3], rows="hardest")
    assert curves.read_series(spread)["suite"] == "slope" and curves.read_series(top)["suite"] == "slope (hardest row)"
    out = curves.main(["--series", str(nominal), str(push), "--out", str(tmp_path / "series.png")])
    assert out.read_bytes().startswith(b"\x89PNG")


def test_series_of_one_suite_are_told_apart_by_their_folders(tmp_path: Path) -> None:
    for folder in ("run", "live"):
        (tmp_path / folder).mkdir()
    paths = [write_series(tmp_path / folder / "eval_series.json", "pit", [0.2]) for folder in ("run", "live")]
    paths.append(write_series(tmp_path / "run" / "eval_series_slope.json", "slope", [0.2]))
    suites = [curves.read_series(path)["suite"] for path in paths]
    assert curves.series_labels(paths, suites) == ["run: pit", "live: pit", "slope"]
    assert curves.main(["--series", *map(str, paths), "--out", str(tmp_path / "series.png")]).is_file()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--series", "{missing}", "--out", "x.png"], "eval series not found"),
        (["--series", "{bad}", "--out", "x.png"], "is not an eval series"),
        (["--series", "{bad}"], "--series needs --out"),
        ([], "give a run directory or --series"),
    ],
)
def test_what_is_not_a_series_gets_one_line(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    bad = tmp_path / "eval_summary.json"
    bad.write_text(json.dumps({"fall_rate": 0.0}))  # one checkpoint's summary, not a series
    names = {"missing": str(tmp_path / "nope.json"), "bad": str(bad)}
    with pytest.raises(SystemExit) as exit_info:
        curves.main([a.format(**names) for a in argv])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]
