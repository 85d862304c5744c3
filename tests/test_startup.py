"""Start-up: ``unilab --help`` and the early answers import no part of the training stack, and what they answer from
(``unilab.apps.catalog``) matches the real registries.

A wall-clock bound would fail on a busy machine and pass a regression on a fast one; what makes these commands
slow is the import of torch, torchrl, mujoco and the tasks, so that is what is checked.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from unilab.apps import catalog

HEAVY = ("torch", "torchrl", "tensordict", "mujoco", "warp", "mujoco_warp", "hydra", "unilab.tasks", "torchrl_ext")


def imported_by(argv: list[str]) -> set[str]:
    """The top-level modules (and ``unilab.tasks``, ``torchrl_ext``) a fresh interpreter holds after ``unilab
    <argv>``."""
    code = (
        "import contextlib, io, json, sys\n"
        "from unilab.apps.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main({argv!r})\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(proc.stdout.splitlines()[-1]))


def test_unilab_help_imports_nothing_heavy() -> None:
    modules = imported_by(["--help"])
    assert not [name for name in HEAVY if name in modules]


def test_unilab_list_imports_nothing_heavy_unless_asked_for_the_sizes() -> None:
    assert not [name for name in HEAVY if name in imported_by(["list"])]
    assert "torch" in imported_by(["list", "--sizes"])  # the widths are read from the tasks themselves


def test_an_unknown_task_is_answered_without_anything_heavy() -> None:
    """The task names come from the task packages' folders, so ``train --task`` is checked without loading them."""
    code = (
        "import json, sys\n"
        "from unilab.apps.catalog import task_names\n"
        "assert 'g1_walk_flat' in task_names()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    modules = set(json.loads(proc.stdout.splitlines()[-1]))
    assert not [name for name in HEAVY if name in modules]


def test_the_gpu_probe_agrees_with_torch() -> None:
    import torch

    assert catalog.cuda_available() == torch.cuda.is_available()


def test_a_training_run_loads_the_viewer_only_when_it_serves_one() -> None:
    """viser costs a quarter of a second and is absent where no viewer runs (a GPU box): ``train`` without
    ``training.viewer`` never imports it."""
    code = "import sys, unilab.apps.train, unilab.run.training_run; print('viser' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.split()[-1] == "False"


def test_a_training_run_loads_onnx_only_when_it_exports() -> None:
    """``onnx`` (with ``ml_dtypes``) costs about a second of every start on a small CPU; a run needs it at its end."""
    code = "import sys, unilab.apps.train, unilab.run.training_run; print('onnx' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.split()[-1] == "False"


def test_the_shipped_tasks_are_the_registry_s_and_their_sizes_their_envs() -> None:
    from unilab.tasks.registry import list_tasks, make_functional_env

    assert catalog.shipped_tasks() == list_tasks()
    for name in catalog.shipped_tasks():
        env = make_functional_env(name, sim="mujoco", num_envs=1)
        assert catalog.task_sizes(name) == (env.obs_dims["policy"], env.obs_dims["critic"], env.action_dim), name


def test_the_declared_backends_are_the_real_ones() -> None:
    from unilab.run import config
    from unilab.sim import BACKENDS, default_backend
    from unilab.tasks.registry import ENTRY_POINT_GROUP

    assert config.BACKENDS == BACKENDS and catalog.default_backend() == default_backend()
    assert catalog.ENTRY_POINT_GROUP == ENTRY_POINT_GROUP


def test_every_algorithm_s_settings_name_a_learner_of_their_loop() -> None:
    """An algorithm's settings class is read without torch; the learner it names runs in the loop its ``on_policy``
    picks, and the one figure the settings restate (the actor's narrowest log-std, for the entropy range) is the
    actor's."""
    from torchrl_ext.networks import LOG_STD_MIN
    from unilab.train.learner import Learner, learner_class
    from unilab.train.off_policy import OffPolicyLearner
    from unilab.train.registry import ALGORITHMS
    from unilab.train.sac.config import ACTOR_LOG_STD_MIN

    for name, settings in ALGORITHMS.items():
        learner = learner_class(settings)
        assert settings().name == name and settings.summary
        assert issubclass(learner, OffPolicyLearner) != settings.on_policy, name
        assert all(
            callable(getattr(learner, method, None)) for method in Learner.__dict__ if not method.startswith("_")
        )
    assert ACTOR_LOG_STD_MIN == LOG_STD_MIN


def test_printed_commands_work_without_an_activated_venv(monkeypatch) -> None:
    """Outside the venv (its bin/ off PATH) a printed command is its full path; inside, its bare name."""
    import os
    from pathlib import Path

    from unilab.apps.args import shell_command

    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "unilab").is_file():
        pytest.skip("unilab is not installed beside this interpreter")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert shell_command("unilab") == str(bin_dir / "unilab")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin")
    assert shell_command("unilab") == "unilab"


def test_the_stack_s_import_is_shown_on_a_terminal_and_then_erased(monkeypatch) -> None:
    import io

    from unilab.apps.cli import import_command

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert import_command("unilab eval", "json").__name__ == "json"
    assert terminal.getvalue() == "unilab eval: loading torch, torchrl, MuJoCo and the tasks...\r\033[K"


# Mistakes the declared tables answer, each with the line the command prints.
EARLY_REFUSALS = [
    (["train", "--task", "g1_walk_flta", "--cfg"], "unknown task 'g1_walk_flta'; known tasks: "),
    (["train", "--task", "g1_rough"], "; did you mean g1_walk_rough?"),
    (["train", "--algo", "td3"], "unknown algo 'td3'; known algos: sac, flashsac, ppo"),
    (["train", "--sim", "mjwrap"], "unknown sim 'mjwrap'; known backends: mjwarp, mujoco; did you mean mjwarp?"),
    (["train", "algo.num_envs=0"], "algo.num_envs must be in [1, 16777216], got 0"),
    (["train", "algo=ppo", "algo.batch_size=64"], "algo.batch_size is a setting of sac and flashsac only"),
    (["train", "+algo.num_env=4"], "unknown key algo.num_env; did you mean algo.num_envs?"),
    (["train", "task.episode_length_s=-2"], "task.episode_length_s must be in (0, 3600], got -2.0"),
    (["train", "algo.resume=gone/model_1.pt"], "algo.resume=gone/model_1.pt: no such checkpoint file"),
    (["eval", "--checkpoint", "gone/model_1.pt", "gone/model_2.pt"], "checkpoint not found: gone/model_1.pt"),
    (["play", "--onnx", "gone/policy.onnx"], "onnx policy not found: gone/policy.onnx"),
    (["view", "--checkpoint", "gone/model_1.pt", "--port", "0"], "checkpoint not found: gone/model_1.pt"),
]


def refused_by(argv: list[str]) -> tuple[str, set[str]]:
    """The one line ``unilab <argv>`` is refused with in a fresh interpreter, and the modules it had imported."""
    code = (
        "import contextlib, io, json, sys\n"
        "from unilab.apps.cli import main\n"
        "err = io.StringIO()\n"
        "with contextlib.redirect_stderr(err):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 2, exit.code\n"
        "print(json.dumps([err.getvalue(), sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    line, modules = json.loads(proc.stdout.splitlines()[-1])
    return line, set(modules)


@pytest.mark.parametrize(("argv", "message"), EARLY_REFUSALS)
def test_a_mistake_is_refused_before_the_stack_is_imported(argv: list[str], message: str) -> None:
    line, modules = refused_by(argv)
    assert len(line.splitlines()) == 1 and message in line, line
    assert not [name for name in HEAVY if name in modules]


def test_the_early_answers_are_the_full_check_s(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """Without the early check, ``train`` composes the config and refuses the same mistakes in the same words, so
    the two cannot drift apart (and ``scripts/train.py``, which composes directly, says the same)."""
    from unilab.apps import train

    monkeypatch.setattr(train, "check_train", lambda arguments: None)
    for argv, message in EARLY_REFUSALS:
        if argv[0] != "train":
            continue
        with pytest.raises(SystemExit):
            train.main(argv[1:])
        assert message in capsys.readouterr().err, argv


def test_the_train_command_checks_before_it_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``train`` console command (not ``unilab train``) runs the same early checks."""
    code = (
        "import sys\n"
        "from unilab.apps import cli\n"
        "sys.argv = ['train', '--task', 'g1_rough']\n"
        "try:\n"
        "    cli.train()\n"
        "except SystemExit:\n"
        "    print('torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert proc.stdout.split()[-1] == "False" and "did you mean g1_walk_rough?" in proc.stderr


# What building or stepping an env loads and printing a config does not: tensordict imports torch._dynamo (about a
# second on a small CPU), torchrl its specs, envs and LLM data classes, and torchrl_ext's losses load both.
LOADED_BY_AN_ENV = ("torch._dynamo", "tensordict", "torchrl", "torchrl_ext.sac", "unilab.envs.functional")


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--help"], "main keys and their defaults for --algo sac --task g1_walk_flat"),
        (["--task", "g1_motion_tracking", "--cfg"], "\n  motion_file: null\n"),  # a knob of the task's factory
    ],
)
def test_train_help_and_cfg_load_the_tasks_but_no_env(argv: list[str], shown: str) -> None:
    """``train --help`` and ``train --cfg`` compose the config and read the task's knobs from its factory's
    signature, so they import torch and every task package; an env, and the stack under it, wait for a run."""
    code = (
        "import contextlib, io, json, sys\n"
        "from unilab.apps import cli\n"
        f"sys.argv = ['train', *{argv!r}]\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    try:\n"
        "        cli.train()\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 0, exit.code\n"
        "print(json.dumps([out.getvalue(), sorted(sys.modules)]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    printed, modules = json.loads(proc.stdout.splitlines()[-1])
    assert shown in printed and {"torch", "unilab.tasks.g1_motion_tracking"} <= set(modules)
    assert not [name for name in LOADED_BY_AN_ENV if name in modules]


@pytest.mark.parametrize("command", ["eval", "play", "view", "bench", "cache"])
def test_help_shows_no_markup(command: str, capsys: pytest.CaptureFixture) -> None:
    """A command's description is its module docstring's first line, written for the docs; --help drops the markup."""
    from unilab.apps.cli import COMMANDS

    module = __import__(COMMANDS[command][0], fromlist=["main"])
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    help_text = capsys.readouterr().out
    assert exit_info.value.code == 0 and help_text.startswith("usage: ") and "``" not in help_text
