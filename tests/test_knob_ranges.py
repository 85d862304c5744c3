"""A task knob's range is declared in its factory's annotation and checked with the config, before any work: a finite
value that is absurd (a noise 1e300 times the task's, a negative one) is one line naming the knob and its range."""

from __future__ import annotations

import pytest

from unilab.apps.compose import knob_ranges, task_knobs
from unilab.apps.train import main
from unilab.envs.config import task_model
from unilab.sim import SimConfig
from unilab.tasks.registry import list_tasks, make_task


@pytest.mark.parametrize(
    ("task", "override", "got"),
    [
        ("g1_walk_rough", "task.noise_scale=1e300", "1e+300"),
        ("g1_walk_flat", "task.noise_scale=-1", "-1"),
        ("go1_walk_flat", "task.noise_scale=10.5", "10.5"),
        ("g1_motion_tracking", "task.reset_noise_scale=-0.1", "-0.1"),
    ],
)
def test_an_absurd_knob_value_is_one_line_naming_its_range(task: str, override: str, got: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--cfg", "sim=mujoco", f"task={task}", override])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"train: error: {override.split('=')[0]} must be in [0, 10] (a multiple of the task's noise; 0 turns it off), "
        f"got {got}"
    ]


@pytest.mark.parametrize("value", ["0", "10", "0.5"])
def test_the_ends_of_a_knob_s_range_are_taken(value: str, capsys) -> None:
    main(["--cfg", "sim=mujoco", "task=g1_walk_rough", f"task.noise_scale={value}"])
    assert f"  noise_scale: {value}\n" in capsys.readouterr().out


@pytest.mark.parametrize("task", list_tasks())
def test_every_numeric_knob_of_a_shipped_task_has_a_range(task: str) -> None:
    numeric = {
        knob
        for knob, default in task_knobs(task).items()
        if isinstance(default, (int, float)) and type(default) is not bool
    }
    assert numeric <= set(knob_ranges(task))


@pytest.mark.parametrize("task", ["g1_walk_rough", "go1_walk_rough"])
def test_a_rough_walk_s_physics_buffers_are_knobs(task: str, capsys) -> None:
    """``bench train`` and ``train`` size the buffers, pick the pair search, the geoms on height fields and boxes and
    the terrain's layout from the command line; a zero, or a layout the scene does not build, is refused in one line."""
    physics = make_task(task, nconmax=64, njmax=400, broadphase="sap_tile").physics
    assert (physics.nconmax, physics.njmax, physics.broadphase) == (64, 400, "sap_tile")
    assert make_task(task).physics.broadphase is None
    assert make_task(task, hfield_geoms=".*foot.*").terrain.hfield_geoms == ".*foot.*"
    assert make_task(task, box_geoms=".*foot.*").terrain.box_geoms == ".*foot.*"
    assert make_task(task).terrain.layout == "terraced"
    assert make_task(task, layout="solid").terrain.layout == "solid"
    with pytest.raises(
        ValueError, match=r"^unknown terrain layout 'bogus'; known layouts: tiled, single, terraced, solid$"
    ):
        make_task(task, layout="bogus")
    main(["--cfg", "sim=mujoco", f"task={task}", "task.layout=solid", "task.broadphase=null"])
    printed = capsys.readouterr().out
    assert "  layout: solid\n" in printed and "  broadphase: null\n" in printed
    for override, error in [
        ("task.njmax=0", "task.njmax must be in [1, 8192] (constraint rows one world's solve holds), got 0"),
        (
            "task.layout=bogus",
            "task.layout must be one of tiled, single, terraced, solid (how the scene builds the terrain), got 'bogus'",
        ),
        (
            "task.broadphase=bvh",
            "task.broadphase must be one of nxn, sap_tile, sap_segmented (MuJoCo Warp's pair search; null: its own "
            "choice), got 'bvh'",
        ),
    ]:
        with pytest.raises(SystemExit):
            main(["--cfg", "sim=mujoco", f"task={task}", override])
        assert capsys.readouterr().err.splitlines() == [f"train: error: {error}"]


@pytest.mark.parametrize("value", ["[flat,stairs]", "[]", "5"])
def test_terrain_columns_that_name_no_kind_are_one_line(value: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--cfg", "sim=mujoco", "task=go1_walk_rough", f"task.terrain_columns={value}"])
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("train: error: task.terrain_columns must be a list of one or more of flat, pyramid_stairs,")


@pytest.mark.parametrize("task", list_tasks())
def test_every_task_takes_the_solver_s_iteration_caps_and_keeps_its_mjcf_s_without_them(task: str) -> None:
    """``task.solver_iterations`` and ``task.ls_iterations`` reach the compiled model; left null, the robot's MJCF
    decides (the G1's 100 and 50, the Go1's 10 and 20), as before the knobs existed."""
    mjcf = (10, 20) if task.startswith("go1") else (100, 50)
    default = task_model(make_task(task)).opt
    assert (make_task(task).physics.iterations, (default.iterations, default.ls_iterations)) == (None, mjcf)
    capped = make_task(task, solver_iterations=7, ls_iterations=9)
    assert (capped.physics.iterations, capped.physics.ls_iterations) == (7, 9)
    model = task_model(capped).opt
    assert (model.iterations, model.ls_iterations) == (7, 9)
    assert task_model(make_task(task, ls_iterations=9)).opt.iterations == mjcf[0]  # each cap on its own


def test_the_physics_settings_take_whole_iteration_counts_only() -> None:
    """The Python API's way in (``make_env(..., solver_iterations=10.5)``) meets the same rule as the command line."""
    with pytest.raises(ValueError, match=r"^SimConfig.iterations must be a whole number, got 10.5$"):
        make_task("g1_walk_flat", solver_iterations=10.5)
    with pytest.raises(ValueError, match=r"^SimConfig.ls_iterations must be positive, got 0$"):
        SimConfig(ls_iterations=0)


@pytest.mark.parametrize("task", list_tasks())
def test_every_task_sizes_its_physics_buffers_from_its_knobs(task: str) -> None:
    """Contacts a world and constraint rows a world are knobs of every task, so a run can size them to what its
    robots touch (``health``'s peaks say how full they get)."""
    physics = make_task(task, nconmax=48, njmax=256).physics
    assert (physics.nconmax, physics.njmax) == (48, 256)
    assert {"nconmax", "njmax"} <= set(knob_ranges(task))


@pytest.mark.parametrize(("value", "got"), [("0", "0"), ("10.5", "10.5"), ("abc", "'abc'"), ("1001", "1001")])
def test_a_solver_cap_that_is_not_a_whole_number_in_range_is_one_line(value: str, got: str, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--cfg", "sim=mujoco", f"task.ls_iterations={value}"])
    assert capsys.readouterr().err.splitlines() == [
        "train: error: task.ls_iterations must be null or a whole number in [1, 1000] (Newton iterations a substep at "
        f"most; null: the MJCF's), got {got}"
    ]
