"""Naming a call's Warp kernels without launching them, then building them side by side."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import warp as wp

from unilab.sim.kernel_prebuild import launched_kernels, load_variants


@wp.kernel
def _add_one(values: wp.array(dtype=float)):
    values[wp.tid()] += 1.0


@wp.kernel
def _double(values: wp.array(dtype=float)):
    values[wp.tid()] *= 2.0


def test_a_recorded_call_names_its_kernels_and_runs_none() -> None:
    """Both launch kinds are recorded with the block size Warp would compile them for (one on the CPU); a captured
    loop's body is entered once, so what it launches is found too; no array changes."""
    values = wp.zeros(4, dtype=float, device="cpu")
    loops = []

    def body() -> None:
        loops.append(1)
        wp.launch(_double, dim=4, inputs=[values], device="cpu")

    def call() -> None:
        wp.launch(_add_one, dim=4, inputs=[values], device="cpu")
        wp.launch_tiled(_add_one, dim=[4], inputs=[values], device="cpu", block_dim=64)
        wp.capture_while(wp.ones(1, dtype=int, device="cpu"), while_body=body)

    variants = launched_kernels(call, "cpu")
    assert {(module.name, dim) for module, dim in variants} == {(_add_one.module.name, 1), (_double.module.name, 1)}
    assert loops == [1]
    np.testing.assert_array_equal(values.numpy(), np.zeros(4))
    assert wp.launch is not None and wp.launch.__module__.startswith("warp")  # Warp's own launch is back

    load_variants(variants, "cpu", workers=2)
    wp.launch(_add_one, dim=4, inputs=[values], device="cpu")
    np.testing.assert_array_equal(values.numpy(), np.ones(4))


def test_a_failing_call_puts_warp_s_launch_back() -> None:
    launch = wp.launch

    def call() -> None:
        raise RuntimeError("mid-step")

    with pytest.raises(RuntimeError, match="mid-step"):
        launched_kernels(call, "cpu")
    assert wp.launch is launch


@pytest.mark.slow  # a fresh process that loads mujoco_warp's step on Warp's CPU device
def test_the_recording_names_every_module_a_real_step_loads() -> None:
    """Of the modules a first step of the G1's scene loads (from Warp's cache here), none is missing from what the
    recorded step named, so the side-by-side build leaves the real step nothing to compile."""
    code = (
        "import mujoco_warp as mjw\n"
        "from warp._src.context import user_modules\n"
        "from unilab.robots import g1\n"
        "from unilab.sim import make_backend, warp_model\n"
        "from unilab.sim.kernel_prebuild import launched_kernels\n"
        "sim = make_backend('mjwarp', g1.load_model(), 1, device='cpu')\n"
        "d = warp_model.scratch_data(sim.model, sim.config)\n"
        "step = lambda: warp_model.step_and_refresh(sim._m, d)\n"
        "named = {(m.name, dim) for m, dim in launched_kernels(step, 'cpu')}\n"
        "loaded = lambda: {(name, key[1]) for name, module in user_modules.items() for key in module.execs}\n"
        "before = loaded()\n"
        "sim._step_scratch()\n"
        "new = loaded() - before\n"
        "print(len(new), len(new - named), len(named))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, check=True)
    new, missed, named = map(int, out.stdout.split()[-3:])
    assert new > 0 and named >= new
    assert missed == 0


def test_a_step_with_the_segmented_pair_search_records_and_the_native_sorts_come_back() -> None:
    """``sap_segmented`` sorts its pairs with Warp's native segmented sort, which reads segment bounds that only its
    kernels would have written: recorded, the sort does nothing (it refused the unfilled bounds when it ran), and
    Warp's own functions are back once the recording ends."""
    from unilab.robots import g1
    from unilab.sim import SimConfig, make_backend, warp_model

    sim = make_backend("mjwarp", g1.load_model(), 2, device="cpu", config=SimConfig(broadphase="sap_segmented"))
    natives = {name: getattr(wp.utils, name) for name in ("segmented_sort_pairs", "radix_sort_pairs", "array_scan")}
    d = warp_model.scratch_data(sim.model, sim.config)
    named = {module.name for module, _ in launched_kernels(lambda: warp_model.step_and_refresh(sim._m, d), "cpu")}
    assert any(name.startswith("_sap_broadphase") for name in named)  # the pair search's own kernels, after the sort
    assert {name: getattr(wp.utils, name) for name in natives} == natives
