"""`unilab bench profile`: kernel families, busy time, the table; the full run on CUDA."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from test_train import TINY, for_algo

from unilab.apps.attribution import (
    HostRange,
    Kernel,
    attribution_table,
    book_to_phases,
    busy_us,
    kernel_family,
    kernel_launches,
    phase_profile,
    physics_stage,
    short_kernel_name,
    tally,
    warp_kernel_stages,
)
from unilab.apps.bench import main as bench_main
from unilab.apps.compose import compose_config
from unilab.tasks.registry import make_functional_env
from unilab.train.off_policy import UPDATE_PHASES, OffPolicyTrainer

WARP_STAGES = {"_solve_done__locals__kernel_0f0f0f0f_cuda_kernel_forward": "physics: solver"}


@pytest.mark.parametrize(
    ("name", "family"),
    [
        ("_solve_done__locals__kernel_0f0f0f0f_cuda_kernel_forward", "physics: solver"),
        ("_unknown_12345678_cuda_kernel_forward", "warp: other"),
        ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32", "matmul"),
        ("nvjet_tst_128x64_64x4_1x2_h_bz_NNT", "matmul"),
        ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<TensorListMetadata<4>>", "optimiser"),
        ("triton_poi_fused_add_clamp_mul_0", "fused (Triton)"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "copy and fill"),
        ("Memcpy DtoD (Device -> Device)", "copy and fill"),
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", "reduction"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", "torch elementwise"),
        ("some_library_kernel", "other"),
    ],
)
def test_kernels_are_booked_to_their_family(name: str, family: str) -> None:
    assert kernel_family(name, WARP_STAGES) == family


@pytest.mark.parametrize(
    ("module", "stage"),
    [
        ("mujoco_warp._src.solver", "physics: solver"),
        ("mujoco_warp._src.collision_primitive", "physics: collision"),
        ("mujoco_warp._src.smooth", "physics: kinematics and dynamics"),
        ("mujoco_warp._src.forward", "physics: actuation and integration"),
        ("mujoco_warp._src.support", "physics: other"),
        ("unilab.sim.kernels", "warp: other"),
    ],
)
def test_warp_kernels_take_the_stage_of_their_module(module: str, stage: str) -> None:
    assert physics_stage(module) == stage


def test_the_loaded_mujoco_warp_kernels_are_found_with_their_stages() -> None:
    """On Warp's CPU device: the registry read works on this Warp, and a step's kernels land in known stages."""
    from unilab.envs.runner import EnvRunner
    from unilab.tasks.registry import make_functional_env

    EnvRunner(make_functional_env("g1_walk_flat", sim="mjwarp", num_envs=2, device="cpu")).step()
    stages = warp_kernel_stages()
    assert all(symbol.endswith("_cuda_kernel_forward") for symbol in stages)
    found = set(stages.values())
    assert {"physics: solver", "physics: collision", "physics: kinematics and dynamics"} <= found


def test_busy_time_counts_overlapping_kernels_once() -> None:
    kernels = [Kernel("a", 0, 10), Kernel("b", 5, 15), Kernel("c", 20, 25), Kernel("d", 21, 22)]
    assert busy_us(kernels) == 20
    assert busy_us([]) == 0


def test_tally_is_per_replay_and_ranks_families_and_kernels_by_time() -> None:
    gemm, step = "nvjet_tst_gemm", "_solve_init_1a2b3c4d_cuda_kernel_forward"
    kernels = [
        Kernel(gemm, 0, 100),
        Kernel(step, 100, 400),
        Kernel(gemm, 1000, 1100),
        Kernel(step, 1100, 1400),  # two replays of the same two kernels
    ]
    result = tally(kernels, replays=2, warp_stages={step: "physics: solver"})
    assert result["kernels"] == 2 and result["busy_ms"] == pytest.approx(0.4)
    assert list(result["families"]) == ["physics: solver", "matmul"]
    assert result["families"]["physics: solver"] == {"kernels": 1.0, "ms": 0.3}
    assert result["top_kernels"][0] == {"name": step, "ms": 0.3}


def test_the_table_gives_each_graph_its_totals_then_its_families() -> None:
    row = tally([Kernel("nvjet_gemm", 0, 500), Kernel("triton_poi_fused_0", 500, 600)], replays=1, warp_stages={})
    row.update(wall_ms=1.2, busy_fraction=0.5)
    phases = {
        "critic: forward": {"runs": 8.0, "kernels": 40.0, "ms": 0.5},
        "actor: forward": {"runs": 2.0, "kernels": 0.0, "ms": 0.0},  # launched nothing: left out
        "outside the phases": {"runs": 0.0, "kernels": 2.0, "ms": 0.01},
    }
    graphs = {"update": row, "iteration": {"wall_ms": 2.5}}
    lines = attribution_table({"graphs": graphs, "update_phases": phases, "physics_alone_ms": 0.7}).splitlines()
    assert lines[2] == "| **update** | all: wall 1.200 ms, busy 0.600 ms (50 %) | 2 | |"
    assert lines[3] == "| update | matmul | 1.0 | 0.500 |" and lines[4] == "| update | fused (Triton) | 1.0 | 0.100 |"
    assert lines[5] == "| update, by phase | critic: forward (x8) | 40.0 | 0.500 |"
    assert lines[6] == "| update, by phase | outside the phases | 2.0 | 0.010 |"
    assert "wall 2.500 ms" in lines[7] and "wall 0.700 ms" in lines[8]
    assert lines[9:12] == ["", "| graph | longest kernels | ms / replay |", "|---|---|---|"]
    assert lines[12:] == ["| update | `nvjet_gemm` | 0.500 |", "| update | `triton_poi_fused_0` | 0.100 |"]


def test_kernel_names_are_shortened_to_what_tells_them_apart() -> None:
    warp = "ccd_hfield_kernel_builder__locals__ccd_hfield_kernel_1fb08bba_cuda_kernel_forward"
    assert short_kernel_name(warp) == "ccd_hfield_kernel_builder.ccd_hfield_kernel_1fb08bba"
    torch_kernel = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(at::native::ReduceOp<float>)"
    assert short_kernel_name(torch_kernel) == "at::native::reduce_kernel"
    assert short_kernel_name("triton_poi_fused_add_0") == "triton_poi_fused_add_0"


def test_kernels_are_booked_to_the_innermost_range_that_launched_them() -> None:
    ranges = [
        HostRange("block", 0, 100),
        HostRange("critic: forward", 0, 10),
        HostRange("critic: backward", 10, 30),
        HostRange("critic: forward", 60, 70),
    ]
    launches = [(5, 1000), (65, 1000), (20, 500), (35, 100), (None, 200), (150, 300)]  # (launched at, duration) us
    booked = book_to_phases(ranges, launches, repeats=2)
    assert booked["critic: forward"] == {"runs": 1.0, "kernels": 1.0, "ms": 1.0}
    assert booked["critic: backward"] == {"runs": 0.5, "kernels": 0.5, "ms": 0.25}
    assert booked["block"] == {"runs": 0.5, "kernels": 0.5, "ms": 0.05}  # between the inner ranges
    assert booked["outside the phases"] == {"runs": 0.0, "kernels": 1.0, "ms": 0.25}  # no launch, or after all


def test_each_kernel_is_dated_by_the_host_op_that_queued_it_and_the_unclaimed_keep_their_time() -> None:
    def event(kind: str, start: float, end: float, kernels: tuple[float, ...] = (), note: bool = False):
        claimed = [SimpleNamespace(duration=d) for d in kernels]
        span = SimpleNamespace(start=start, end=end)
        return SimpleNamespace(device_type=kind, time_range=span, kernels=claimed, is_user_annotation=note)

    events = [
        event("cpu", 10, 20, kernels=(4,)),
        event("cpu", 30, 40, kernels=(2, 6)),
        event("cpu", 50, 60),  # queued nothing
        *(event("cuda", t, t + d) for t, d in ((100, 4), (110, 2), (120, 6), (130, 3), (140, 5))),
        event("cuda", 100, 145, note=True),  # a profiler range's annotation on the device, over its kernels
    ]
    launches = kernel_launches(events, host="cpu", device="cuda")
    assert launches[:3] == [(10, 4), (30, 2), (30, 6)]
    assert launches[3:] == [(None, 4.0), (None, 4.0)]  # two kernels no op claims, 3 + 5 us between them


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_an_update_block_shows_each_phase_as_often_as_it_runs(algo: str) -> None:
    cfg = compose_config([f"algo={algo}", "task=g1_walk_flat", "sim=mujoco", *for_algo(algo, TINY)])
    trainer = OffPolicyTrainer(make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4), cfg.algo)
    while not trainer.ready:
        trainer.collect()
    batch = trainer.replay.sample(trainer.learner.minibatch * cfg.algo.updates_per_step)
    trainer.learner.profile_phases = True
    phases = phase_profile(lambda: trainer.learner.update(batch), UPDATE_PHASES, repeats=2, device=trainer.device)
    updates, actor_updates = cfg.algo.updates_per_step, -(-cfg.algo.updates_per_step // cfg.algo.policy_frequency)
    expected = {name: actor_updates if name.startswith(("actor", "alpha")) else updates for name in UPDATE_PHASES}
    assert {name: row["runs"] for name, row in phases.items()} == {**expected, "outside the phases": 0}
    assert all(row["kernels"] == 0 for row in phases.values())  # CPU tensors: no device kernels to book


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_profile_without_cuda_is_one_line(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_main(["profile"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "bench profile needs a CUDA device" in err.splitlines()[-1]


@pytest.mark.gpu
def test_profile_of_a_small_sac_iteration_on_cuda(tmp_path, capsys: pytest.CaptureFixture) -> None:
    small = ["algo.batch_size=1024", "algo.replay_buffer_n=16", "algo.learning_starts=2", "algo.compile=false"]
    out = tmp_path / "table.md"
    bench_main(["profile", "--num-envs", "256", "--replays", "5", "--out", str(out), *small])
    printed = capsys.readouterr().out
    assert out.read_text().strip() in printed
    result = json.loads(printed.splitlines()[0])
    graphs = result["graphs"]
    assert list(graphs) == ["env_step", "record", "update", "iteration"]
    env_step, update = graphs["env_step"], graphs["update"]
    assert any(family.startswith("physics") for family in env_step["families"]) and "matmul" in update["families"]
    for row in (env_step, graphs["record"], update):
        assert row["kernels"] > 0 and 0 < row["busy_ms"] <= row["wall_ms"] * 1.05
    assert 0 < result["physics_alone_ms"] < env_step["wall_ms"]
    phases = result["update_phases"]
    assert all(phases[name]["kernels"] > 0 for name in ("critic: forward", "critic: backward", "critic: optimiser"))
    booked = sum(row["kernels"] for name, row in phases.items() if name != "outside the phases")
    assert booked > 0.9 * update["kernels"]  # eagerly, the block launches what its graph replays
    # Each critic update runs each of its phases once (a range's device-side annotation is not a second run), and
    # almost every kernel is launched inside some phase.
    assert len({phases[name]["runs"] for name in ("critic: forward", "critic: backward", "target")}) == 1
    assert phases["outside the phases"]["ms"] < 0.1 * sum(row["ms"] for row in phases.values())


@pytest.mark.gpu
def test_profile_of_a_small_ppo_iteration_on_cuda(capsys: pytest.CaptureFixture) -> None:
    bench_main(["profile", "--workload", "ppo", "--num-envs", "256", "--replays", "5", "algo.compile=false"])
    result = json.loads(capsys.readouterr().out.splitlines()[0])
    graphs = result["graphs"]
    assert list(graphs) == ["rollout_step", "update", "iteration"] and "update_phases" not in result
    step, update = graphs["rollout_step"], graphs["update"]
    assert any(family.startswith("physics") for family in step["families"]) and "matmul" in update["families"]
    for row in (step, update):
        assert row["kernels"] > 0 and 0 < row["busy_ms"] <= row["wall_ms"] * 1.05
    # An iteration replays the step graph once per rollout step, then the update.
    assert graphs["iteration"]["wall_ms"] > 24 * step["busy_ms"]
    assert 0 < result["physics_alone_ms"] < step["wall_ms"]
