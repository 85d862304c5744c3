"""``unilab bench``: the canonical train runs in fresh processes, reported from their run_summary.json; drift."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_train import for_algo

from unilab.apps import bench, bench_profile, cli
from unilab.apps import bench_train as train_runs

TINY = ["algo.max_iterations=22", "algo.num_envs=4", "algo.batch_size=64", "algo.replay_buffer_n=64"]
TINY += ["algo.learning_starts=2", "algo.actor_hidden=[32]", "algo.critic_hidden=[32]"]
FINISHED = subprocess.CompletedProcess([], 0, "", "")  # a run that wrote no summary


@pytest.mark.parametrize("workload", ["sac", "ppo"])
def test_train_bench_reports_every_run_and_counts_failures(
    workload: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    args = ["train", "--workloads", workload, "--repeats", "1", "--sim", "mujoco", "--log-root", str(tmp_path)]
    bench.main([*args, *for_algo(workload, TINY)])  # every override applies to every run: each its algorithm's
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    run, summary = lines
    assert run["status"] == "completed" and run["returncode"] == 0
    assert run["tail_env_steps_per_sec"] > 0 and set(run["tail_seconds_per_iteration"]) == {"collect", "update"}
    assert run["final_env_steps_per_sec"] > 0
    recorded = json.loads((tmp_path / f"{workload}_0" / "run_summary.json").read_text())
    for key in ("startup_sec", "startup_compile", "startup_kernel_build", "startup_side"):
        assert run[key] == recorded[key], key
    assert recorded["algo"] == workload
    assert recorded["config"]["algo"]["max_iterations"] == 22  # the caller's overrides win over the canonical ones
    assert summary["median"] == round(run["tail_env_steps_per_sec"]) and summary["failed"] == 0
    assert summary["startup_total_sec"] == [round(run["startup_total_sec"], 1)] == [summary["startup_median_sec"]]

    rows = [dict(run, status="failed", tail_env_steps_per_sec=None), run]
    failed = train_runs.summarize_train(rows)[0]
    assert failed["runs"] == 2 and failed["failed"] == 1 and failed["tail_env_steps_per_sec"] == [summary["median"]]


def test_train_bench_fails_when_a_run_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["train", "--workloads", "sac", "--repeats", "1", "--sim", "mujoco", "--log-root", str(tmp_path)]
    with pytest.raises(SystemExit) as exc:
        bench.main([*args, *TINY, "algo.lr=nan"])
    captured = capsys.readouterr()
    assert json.loads(captured.out.splitlines()[0])["returncode"] == 2  # the row still reports the run
    assert exc.value.code == 2 and captured.err.splitlines() == [
        "unilab bench: error: 1 of 1 runs failed; the first (sac, exit status 2): "
        "train: error: algo.lr must be finite, got nan"
    ]


def test_train_bench_rejects_unknown_workloads(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        bench.main(["train", "--workloads", "td3"])
    assert "unknown workloads ['td3']" in capsys.readouterr().err


@pytest.mark.parametrize("override", ["task=g1_walk_rough", "algo=sac", "+sim=mujoco"])
def test_train_bench_refuses_overrides_that_name_the_workload_before_any_run(
    override: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(train_runs.subprocess, "run", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as exc:
        bench.main(["train", "--workloads", "ppo", "--sim", "mujoco", "algo.num_envs=8", override])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "unilab bench: error: a workload fixes algo and task, and --sim the backend; "
        f"drop ['{override}'] or pick a workload"
    )


def test_cold_runs_each_start_with_an_empty_cache_root_of_their_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path / "my_warp"))  # a user's own cache: not found by a cold run
    monkeypatch.setenv("UNILAB_CACHE_DIR", str(tmp_path / "warm_root"))
    seen = []

    def compiling(command: list[str], env: dict[str, str] | None = None, **_: object) -> subprocess.CompletedProcess:
        root = Path(env["UNILAB_CACHE_DIR"])
        seen.append((root, [p.name for p in root.iterdir()], "WARP_CACHE_PATH" in env))
        (root / "warp").mkdir()
        (root / "warp" / "kernel.cubin").write_bytes(b"x" * 1234)  # what the run compiled
        run_dir = Path(next(a for a in command if a.startswith("training.log_dir=")).split("=", 1)[1])
        run_dir.mkdir()
        (run_dir / "run_summary.json").write_text(json.dumps({"status": "completed", "tail_env_steps_per_sec": 1.0}))
        return FINISHED

    monkeypatch.setattr(train_runs.subprocess, "run", compiling)
    bench.main(
        ["train", "--workloads", "sac,ppo", "--repeats", "1", "--sim", "mujoco", "--cold", "--log-root", str(tmp_path)]
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()][:2]
    assert [(row["cold"], row["cache_bytes"]) for row in rows] == [(True, 1234), (True, 1234)]
    (first, *_), (second, *_) = seen
    assert first != second and all(contents == [] and not user_warp for _, contents, user_warp in seen)
    assert not first.exists() and not second.exists()  # removed after each run
    assert first.parent == second.parent != tmp_path / "warm_root"
    commands = []
    monkeypatch.setattr(train_runs.subprocess, "run", lambda command, env=None, **k: commands.append(env) or FINISHED)
    train_runs.bench_train(["sac"], 1, "mujoco", [], tmp_path / "warm")
    assert commands == [None] and "cold" not in json.loads(capsys.readouterr().out.splitlines()[0])  # warm: as is


def test_warm_runs_start_in_the_root_their_workload_s_last_cold_run_filled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A start-up table's two columns from one bench: each workload's first runs, each in an empty root, then its
    later ones in the root the last of them filled; each kind summarised apart, every root removed at the end."""
    seen = []

    def compiling(command: list[str], env: dict[str, str] | None = None, **_: object) -> subprocess.CompletedProcess:
        root = Path(env["UNILAB_CACHE_DIR"])
        held = sorted(p.name for p in root.iterdir())
        run_dir = Path(next(a for a in command if a.startswith("training.log_dir=")).split("=", 1)[1])
        seen.append((run_dir.name, root, held))
        (root / f"from_{run_dir.name}").write_bytes(b"x" * 10)  # what the run compiled
        run_dir.mkdir()
        startup = 60.0 if not held else 9.0  # a run that finds the caches full starts fast
        summary = {"status": "completed", "tail_env_steps_per_sec": 1.0, "startup_total_sec": startup}
        (run_dir / "run_summary.json").write_text(json.dumps(summary))
        return FINISHED

    monkeypatch.setattr(train_runs.subprocess, "run", compiling)
    bench.main([
        "train", "--workloads", "sac,ppo", "--repeats", "2", "--cold", "--warm", "2", "--sim", "mujoco",
        "--log-root", str(tmp_path),
    ])  # fmt: skip
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs, summaries = lines[:8], lines[8:]
    names = [name for name, _, _ in seen]
    assert names == ["sac_0", "ppo_0", "sac_1", "ppo_1", "sac_warm_0", "ppo_warm_0", "sac_warm_1", "ppo_warm_1"]
    roots = {name: root for name, root, _ in seen}
    assert len({roots[n] for n in names[:4]}) == 4  # every cold run in an empty root of its own
    assert all(held == [] for _, _, held in seen[:4])
    assert roots["sac_warm_0"] == roots["sac_warm_1"] == roots["sac_1"] != roots["ppo_1"] == roots["ppo_warm_0"]
    assert seen[5][2] == ["from_ppo_1"] and seen[6][2] == ["from_sac_1", "from_sac_warm_0"]
    assert not any(root.exists() for root in roots.values())
    assert [(row["cold"], row["cache_bytes"]) for row in runs] == [(True, 10)] * 4 + [(False, 20), (False, 20)] + [
        (False, 30),
        (False, 30),
    ]
    assert [(row["workload"], row["cold"], row["runs"], row["startup_median_sec"]) for row in summaries] == [
        ("sac", True, 2, 60.0),
        ("ppo", True, 2, 60.0),
        ("sac", False, 2, 9.0),
        ("ppo", False, 2, 9.0),
    ]


@pytest.mark.parametrize(
    ("args", "said"),
    [(["--warm", "2"], "--warm runs start from the caches"), (["--cold", "--warm", "-1"], "--warm must be >= 0")],
)
def test_warm_runs_need_cold_ones_before_them(
    args: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(train_runs.subprocess, "run", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as exc:
        bench.main(["train", "--workloads", "sac", "--sim", "mujoco", *args])
    assert exc.value.code == 2 and said in capsys.readouterr().err


def test_variants_run_interleaved_each_with_its_overrides_and_are_summarised_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    commands = []

    def running(command: list[str], **_: object) -> subprocess.CompletedProcess:
        commands.append(command)
        run_dir = Path(next(a for a in command if a.startswith("training.log_dir=")).split("=", 1)[1])
        run_dir.mkdir()
        rate = 2.0 if "algo.updates_per_step=6" in command else 1.0
        summary = {"status": "completed", "tail_env_steps_per_sec": rate, "startup_total_sec": 10.0 * len(commands)}
        (run_dir / "run_summary.json").write_text(json.dumps(summary))
        return FINISHED

    monkeypatch.setattr(train_runs.subprocess, "run", running)
    bench.main([
        "train", "--workloads", "sac", "--repeats", "2", "--sim", "mujoco", "--log-root", str(tmp_path),
        "--variant", "base=", "--variant", "six=algo.updates_per_step=6 task.njmax=300", "algo.num_envs=8",
    ])  # fmt: skip
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs, summaries = lines[:4], lines[4:]
    assert [(row["variant"], row["repeat"]) for row in runs] == [("base", 0), ("six", 0), ("base", 1), ("six", 1)]
    assert [Path(row["run_dir"]).name for row in runs] == ["sac_base_0", "sac_six_0", "sac_base_1", "sac_six_1"]
    tails = [command[-3:] for command in commands]
    assert tails[0][-1] == "algo.num_envs=8" and tails[1] == [
        "algo.num_envs=8",
        "algo.updates_per_step=6",
        "task.njmax=300",
    ]
    assert [(row["variant"], row["median"], row["runs"]) for row in summaries] == [("base", 1, 2), ("six", 2, 2)]
    assert [(row["startup_total_sec"], row["startup_median_sec"]) for row in summaries] == [
        ([10.0, 30.0], 20.0),
        ([20.0, 40.0], 30.0),
    ]


@pytest.mark.parametrize(
    ("variants", "said"),
    [
        (["fast"], "--variant takes NAME=OVERRIDES with a name of letters, digits, - and _; got 'fast'"),
        (["a b=x=1"], "--variant takes NAME=OVERRIDES with a name of letters, digits, - and _; got 'a b=x=1'"),
        (["a=", "a=algo.tau=0.1"], "--variant a is given twice"),
        (["a=task.njmax='300"], "--variant a: No closing quotation"),
        (["a=task=g1_walk_rough"], "a workload fixes algo and task, and --sim the backend; drop ['task=g1_walk_rough'] "
         "or pick a workload"),
    ],
)  # fmt: skip
def test_a_bad_variant_is_one_line_before_any_run(
    variants: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setattr(train_runs.subprocess, "run", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as exc:
        bench.main(["train", "--workloads", "sac", "--sim", "mujoco", *(f"--variant={v}" for v in variants)])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"unilab bench: error: {said}"


def test_the_rough_ppo_workload_trains_the_rough_walk(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    commands = []
    monkeypatch.setattr(train_runs.subprocess, "run", lambda command, **k: commands.append(command) or FINISHED)
    train_runs.bench_train(["ppo_rough"], 1, "mujoco", [], tmp_path)
    (command,) = commands
    assert command[command.index("--algo") + 1] == "ppo" and command[command.index("--task") + 1] == "g1_walk_rough"


def test_train_bench_starts_each_run_through_the_train_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The console command places the caches (Python's bytecode among them) before the stack loads; a run started
    past it would import from source every time and time a start-up no user sees."""
    commands, started = [], []
    monkeypatch.setattr(train_runs.subprocess, "run", lambda command, **k: commands.append(command) or FINISHED)
    train_runs.bench_train(["sac"], 1, "mujoco", [], tmp_path)
    ((python, flag, code, *_),) = commands
    assert (python, flag) == (sys.executable, "-c")
    monkeypatch.setattr(cli, "train", lambda: started.append(True))
    exec(code, {})
    assert started == [True]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["physics", "--num-envs", "0"], "--num-envs must be comma-separated integers >= 1, got '0'"),
        (["env", "--num-envs", "4,x"], "--num-envs must be comma-separated integers >= 1, got '4,x'"),
        (["drift", "--num-envs", "2", "--steps", "0"], "--steps must be >= 1, got 0"),
        (["physics", "--num-envs", "2", "--njmax", "0"], "--njmax must be >= 1, got 0"),
        (["physics", "--num-envs", "2", "--device", "tpu"], "--device tpu: not a torch device"),
        (["physics", "--sim", "mujoco", "--device", "meta"], "the mujoco backend runs on the CPU, not on meta"),
        (["env", "--sim", "mjwarp", "--device", "meta"], "the mjwarp backend runs on a CUDA device or on the CPU"),
        (["env", "--num-envs", "2", "--task", "nope"], "unknown task 'nope'; known tasks: g1_motion_tracking"),
    ],
)
def test_bench_sizes_are_checked_before_any_work(args: list[str], message: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err.splitlines()[-1]


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_physics_worlds_that_cannot_fit_are_refused_before_any_allocation(
    sim: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def make_backend(*args: object, **kwargs: object) -> None:
        raise AssertionError("worlds allocated")

    monkeypatch.setattr(bench, "make_backend", make_backend)
    with pytest.raises(SystemExit) as exc:  # the small size first: no size runs while a later one cannot fit
        bench.main(["physics", "--sim", sim, "--num-envs", f"2,{10**12}", "--device", "cpu"])
    captured = capsys.readouterr()
    assert exc.value.code == 2 and captured.out == "" and len(captured.err.splitlines()) == 1
    assert "but cpu has" in captured.err and f"lower --num-envs ({10**12} worlds of at least" in captured.err
    assert ("constraint Jacobian" in captured.err) == (sim == "mjwarp")


@pytest.mark.parametrize(("nconmax", "njmax"), [(64, 400), (8, 4000)])
def test_the_physics_estimate_is_below_what_mjwarp_allocates_per_world(nconmax: int, njmax: int) -> None:
    import dataclasses

    import mujoco_warp as mjw
    import warp as wp

    from unilab.robots import g1
    from unilab.sim import SimConfig

    def allocated(node: object, seen: set[int]) -> int:
        if isinstance(node, wp.array):
            fresh = id(node) not in seen
            seen.add(id(node))
            return node.capacity if fresh else 0
        if dataclasses.is_dataclass(node):
            return sum(allocated(getattr(node, f.name), seen) for f in dataclasses.fields(node))
        return 0

    model = g1.load_model()
    with wp.ScopedDevice("cpu"):
        one, two = (allocated(mjw.make_data(model, nworld=n, nconmax=nconmax, njmax=njmax), set()) for n in (1, 2))
    estimate = bench.physics_bytes_per_world("mjwarp", model, SimConfig(nconmax=nconmax, njmax=njmax))
    assert 0 < estimate["contacts"] + estimate["constraint Jacobian"] <= two - one  # the state is beside mjwarp's data


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_two_runs_of_one_seed_never_part_on_the_cpu(sim: str, capsys: pytest.CaptureFixture) -> None:
    bench.main(["drift", "--sim", sim, "--num-envs", "3", "--steps", "10"])
    row = json.loads(capsys.readouterr().out)
    assert row["bench"] == "drift" and row["steps"] == 10
    assert row["one_step_max_qpos_gap"] == 0.0 and row["first_step_apart"] is None
    assert row["gaps"]["10"] == {"max_qpos_gap": 0.0, "worlds_apart": 0}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU defaults")
def test_env_bench_on_a_cpu_defaults_to_sizes_that_end_quickly_and_says_what_it_runs(monkeypatch, capsys) -> None:
    measured = []

    def fake_bench(task: str, sim: str, num_envs: int, steps: int, device, compile: bool) -> dict:
        measured.append((sim, num_envs, steps))
        return {"bench": "env", "num_envs": num_envs}

    monkeypatch.setattr(bench, "bench_env", fake_bench)
    bench.main(["env", "--task", "g1_walk_flat"])
    assert measured == [("mujoco", 16, 50), ("mujoco", 64, 50)]
    err = capsys.readouterr().err
    assert "unilab bench: env: 16 g1_walk_flat envs on mujoco (cpu), 50 steps" in err.splitlines()


def test_profile_builds_the_task_an_override_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench profile --workload sac task=g1_walk_rough`` profiles the rough walk, not the workload's own task."""
    import unilab.tasks.registry as registry

    built: list[str] = []

    def refuse(task: str, **_: object) -> None:
        built.append(task)
        raise RuntimeError("stop before any env")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(registry, "make_functional_env", refuse)
    with pytest.raises(RuntimeError, match="stop before any env"):
        bench_profile.bench_profile("sac", 2048, 1, ["task=g1_walk_rough", "task.njmax=400"])
    assert built == ["g1_walk_rough"]


@pytest.mark.parametrize(
    ("override", "named"),
    [("task.box_geoms=.*_foot[26]_collision", "mismatched input '['"), ("algo.no_such_key=1", "algo.no_such_key")],
)
def test_profile_refuses_a_bad_override_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, override: str, named: str
) -> None:
    """An override Hydra cannot parse, or a key no config has, ends ``bench profile`` with one line, exit 2."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(SystemExit) as stop:
        bench.main(["profile", "--workload", "sac_rough", override])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and len(err.splitlines()) == 1 and named in err


@pytest.mark.parametrize(("workload", "task"), [("ppo", "g1_walk_rough"), ("ppo_rough", "g1_walk_flat")])
def test_profile_builds_the_on_policy_trainer_for_the_task_an_override_names(
    monkeypatch: pytest.MonkeyPatch, workload: str, task: str
) -> None:
    """A PPO workload is profiled on the trainer a PPO run trains with, for the task an override names, with the
    compiled env step such a run keeps."""
    import unilab.run.precompile as precompile
    import unilab.tasks.registry as registry
    import unilab.train.on_policy as on_policy
    from unilab.train.ppo.config import PPOConfig

    built: list[object] = []

    def env_of(name: str, **_: object) -> SimpleNamespace:
        built.append(name)
        return SimpleNamespace(name=f"{name} env", sim=SimpleNamespace(model=f"{name} model"))

    def refuse(env: SimpleNamespace, cfg: PPOConfig, step_file: Path | None = None) -> None:
        built.append((env.name, cfg.name, step_file))
        raise RuntimeError("stop before any trainer")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(registry, "make_functional_env", env_of)
    monkeypatch.setattr(on_policy, "OnPolicyTrainer", refuse)
    monkeypatch.setattr(precompile, "step_file", lambda cfg, device, model: Path(f"{cfg.task.name} {device} {model}"))
    with pytest.raises(RuntimeError, match="stop before any trainer"):
        bench_profile.bench_profile(workload, 2048, 1, [f"task={task}"])
    assert built == [task, (f"{task} env", "ppo", Path(f"{task} cuda {task} model"))]


@pytest.mark.parametrize("workload", ["ppo", "ppo_rough"])
def test_profile_takes_the_ppo_workloads_and_sets_the_physics_beside_the_rollout_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, workload: str
) -> None:
    asked: list[tuple] = []

    def profiled(*args: object) -> dict:
        asked.append(args)
        return {
            "graphs": {"iteration": {"wall_ms": 60.0}},
            "iteration_order": "24 rollout steps, then their update",
            "physics_alone_ms": 1.5,
        }

    monkeypatch.setattr(bench_profile, "bench_profile", profiled)
    bench.main(["profile", "--workload", workload, "--num-envs", "64", "algo.num_steps_per_env=24"])
    lines = capsys.readouterr().out.splitlines()
    assert asked == [(workload, 64, 50, ["algo.num_steps_per_env=24"])]
    assert json.loads(lines[0])["physics_alone_ms"] == 1.5
    assert "| **iteration** (24 rollout steps, then their update) | wall 60.000 ms | | |" in lines
    assert "| physics alone (`bench physics`, captured) | wall 1.500 ms | | |" in lines


def test_physics_is_timed_with_every_robot_up(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    """Held at its stand targets the G1 falls within a second or so; ``bench physics`` times only steps taken from the
    stand, so what it reports is the cost of robots on their feet."""
    from unilab.sim import make_backend

    pelvis_heights: list[torch.Tensor] = []

    def spied(*args, **kwargs):
        backend = make_backend(*args, **kwargs)
        step = backend.step_

        def step_(state, ctrl) -> None:
            step(state, ctrl)
            pelvis_heights.append(state["qpos"][:, 2].clone())

        backend.step_ = step_
        return backend

    monkeypatch.setattr(bench, "make_backend", spied)
    steps = 3 * bench.STAND_STEPS
    bench.main(["physics", "--sim", "mujoco", "--num-envs", "4", "--steps", str(steps)])
    row = json.loads(capsys.readouterr().out)
    assert row["stand_steps"] == bench.STAND_STEPS and row["eager_steps_per_sec"] > 0
    assert len(pelvis_heights) == 1 + steps  # the untimed first step, then the timed ones
    assert min(float(h.min()) for h in pelvis_heights) > 0.6
    assert row["build_sec"] > 0 and row["first_step_sec"] > 0 and row["warp_opt"] is row["warp_output"] is None


def test_physics_sets_warp_s_optimization_level_and_output_and_refuses_them_off_warp(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import warp as wp

    seen: list[tuple[int | None, str | None]] = []

    def measured(*_: object) -> dict:
        # what every module compiled from here on is built at, and as
        seen.append((wp.config.optimization_level, wp.config.cuda_output))
        return {"bench": "physics"}

    monkeypatch.setattr(bench, "bench_physics", measured)
    monkeypatch.setattr(wp.config, "optimization_level", None)
    monkeypatch.setattr(wp.config, "cuda_output", None)
    tiny = ["physics", "--sim", "mjwarp", "--device", "cpu", "--num-envs", "2", "--steps", "1"]
    bench.main([*tiny, "--warp-opt", "1"])
    assert json.loads(capsys.readouterr().out) == {"bench": "physics", "warp_opt": 1, "warp_output": None}
    monkeypatch.setattr(wp.config, "optimization_level", None)  # Warp's settings are the process's
    bench.main([*tiny, "--warp-output", "cubin"])
    assert json.loads(capsys.readouterr().out) == {"bench": "physics", "warp_opt": None, "warp_output": "cubin"}
    assert seen == [(1, None), (None, "cubin")]
    for args, message in (
        (["--sim", "mujoco", "--warp-opt", "1"], "--warp-opt is Warp's: it needs --sim mjwarp"),
        (["--sim", "mujoco", "--warp-output", "ptx"], "--warp-output is Warp's: it needs --sim mjwarp"),
        (["--sim", "mjwarp", "--warp-opt", "4"], "argument --warp-opt: invalid choice: 4"),
        (["--sim", "mjwarp", "--warp-output", "sass"], "argument --warp-output: invalid choice: 'sass'"),
    ):
        with pytest.raises(SystemExit) as exc:
            bench.main(["physics", "--num-envs", "2", "--steps", "1", *args])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.splitlines()) == 1 and message in err, err


def test_the_stand_stays_up_for_the_steps_timed_at_a_time_and_falls_later() -> None:
    """``STAND_STEPS`` is short enough: from the stand every robot is still up after it, and most are down after three
    times as many steps (which is why the timing starts again from the stand)."""
    from unilab.apps.bench_timing import stand_ctrl, stand_state
    from unilab.robots import g1
    from unilab.sim import SimConfig, make_backend

    backend = make_backend("mujoco", g1.load_model(), 8, config=SimConfig())
    state, ctrl = stand_state(backend, seed=0), stand_ctrl(backend)
    heights = []
    for _ in range(3 * bench.STAND_STEPS):
        backend.step_(state, ctrl)
        heights.append(state["qpos"][:, 2].clone())
    assert float(heights[bench.STAND_STEPS - 1].min()) > 0.6
    assert int((heights[-1] < 0.5).sum()) > 4


def test_a_log_root_holding_a_planned_run_is_refused_before_any_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A run refused for its folder would otherwise leave the folder's earlier summary to stand in for it."""
    (tmp_path / "sac_1").mkdir()
    (tmp_path / "sac_1" / "run_summary.json").write_text(json.dumps({"status": "completed"}))
    monkeypatch.setattr(train_runs.subprocess, "run", lambda *a, **k: pytest.fail("a run started"))
    with pytest.raises(SystemExit) as exc:
        bench.main(["train", "--workloads", "sac", "--repeats", "2", "--sim", "mujoco", "--log-root", str(tmp_path)])
    assert exc.value.code == 2
    said = capsys.readouterr().err.splitlines()[-1]
    assert said == f"unilab bench: error: --log-root {tmp_path} already holds sac_1; give it an empty folder"
    with pytest.raises(ValueError, match="already holds sac_1"):
        train_runs.bench_train(["sac"], 2, "mujoco", [], tmp_path)
    (tmp_path / "sac_b_0").mkdir()
    assert train_runs.held_runs(["sac", "ppo"], 1, {"a": [], "b": []}, tmp_path) == ["sac_b_0"]
    (tmp_path / "ppo_a_warm_1").mkdir()
    assert train_runs.held_runs(["sac", "ppo"], 1, {"a": [], "b": []}, tmp_path, warm=2) == ["sac_b_0", "ppo_a_warm_1"]
