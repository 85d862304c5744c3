"""The training config: Hydra's composition of the config files and overrides, checked against the typed schema.

Same overrides from both entry points: ``train --algo sac --task g1_walk_flat --sim mjwarp algo.max_iterations=160``
and ``python scripts/train.py algo=sac task=g1_walk_flat sim=mjwarp algo.max_iterations=160``. Every check that needs
only the config happens here, so a misspelt key or an impossible value costs nothing.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, open_dict

from unilab.apps.args import unknown_name
from unilab.apps.catalog import DEFAULT_ALGO
from unilab.apps.early import last_values, resume_path
from unilab.core.ranges import Choice, Range, Words
from unilab.run.config import (
    TaskSelection,
    TrainConfig,
    check_bools,
    schema,
    schema_keys,
    task_overrides,
    unknown_key_message,
    validate,
)
from unilab.sim import BACKENDS, default_backend
from unilab.tasks.registry import check_reward_weights, get_task, list_tasks, override_names
from unilab.train.registry import ALGORITHMS
from unilab.train.settings import shape_keys

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"  # shipped in the package, so a wheel can train


def experiments() -> list[str]:
    """The presets of ``configs/experiment``, chosen with ``+experiment=NAME``: a recipe's settings across groups."""
    return sorted(path.stem for path in (CONFIG_DIR / "experiment").glob("*.yaml"))


def _group(overrides: list[str], name: str) -> str | None:
    values = [o.split("=", 1)[1] for o in overrides if o.startswith(f"{name}=")]
    return values[-1] if values else None


def sim_profiles(algo: str) -> dict[str, Path]:
    """An algorithm's settings on a backend's profile (``<sim>.yaml`` beside its settings module: the sizes a CPU
    finishes in minutes), by backend. The backend's own profile (``configs/sim/<sim>.yaml``) sets what every
    algorithm has (envs, iterations); the rest is each algorithm's, since no two share all their keys."""
    folder = Path(inspect.getfile(ALGORITHMS[algo])).parent
    return {path.stem: path for path in sorted(folder.glob("*.yaml"))}


def store_configs(algo: str) -> None:
    """The typed schema of a run of ``algo`` as the base of the defaults list (the one source of defaults), every
    algorithm as an option of Hydra's ``algo`` group with its backend profiles as options of ``profile``, every
    registered task as an option of its ``task`` group and its per-algorithm tuning files as options of ``tuning``,
    so the defaults list finds algorithms and tasks wherever their packages live."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=schema(algo))
    for name in ALGORITHMS:
        store.store(group="algo", name=name, node={"name": name})
        for sim, path in sim_profiles(name).items():
            package = file_package(path, "algo")
            store.store(group="profile", name=f"{sim}_{name}", node=settings_file(path), package=package)
    for name in list_tasks():
        store.store(group="task", name=name, node=TaskSelection(name=name))
        for algo, paths in get_task(name).tuning.items():
            store.store(group="tuning", name=f"{algo}_{name}", node=tuning_node(paths), package="_global_")


def tuning_node(paths: tuple[Path, ...]) -> object:
    """A task's tuning files for one algorithm as one config from the root: each file's keys under the package its
    header names (``algo`` without one), the files merged in order, so a later file's keys win."""
    layers = []
    for path in paths:
        node: object = settings_file(path)
        package = file_package(path, "algo")
        if package != "_global_":
            for key in reversed(package.split(".")):
                node = {key: node}
        layers.append(node)
    return OmegaConf.merge(*layers) if layers else OmegaConf.create()


def settings_file(path: Path) -> object:
    """A YAML file of settings (a task's tuning, a backend profile); one that is no plain YAML (a Python tag, which
    the safe loader refuses to construct, or broken syntax) is refused in one line naming the file and the line."""
    try:
        return OmegaConf.load(path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{path}: not a plain YAML file of settings: {problem}{where}") from None


_PACKAGE_HEADER = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)


def file_package(path: Path, default: str) -> str:
    """Where a settings file's keys go: the package its ``# @package`` header names, else ``default``. A task's
    tuning sets its algorithm's keys (``algo``) unless it says ``_global_``, as one that also sets task keys does."""
    header = _PACKAGE_HEADER.search(path.read_text())
    return header.group(1) if header else default


def _leaves(node: object, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted path, value)`` of a config's leaves (``algo.num_envs``)."""
    if not isinstance(node, dict) or not node:
        return [(prefix, node)]
    return [leaf for name, value in node.items() for leaf in _leaves(value, f"{prefix}.{name}" if prefix else name)]


def _leaf_keys(node: object, prefix: str = "") -> list[str]:
    return [key for key, _ in _leaves(node, prefix)]


def check_file_bools(choices: dict[str, str | None], node: TrainConfig) -> None:
    """``check_bools`` for the config files a composition chose (Hydra's ``choices``: group -> option), as they are
    written: the merge into the schema converts 2 or 'yes' to true there as it does on the command line. A file of
    the config directory puts its keys under its group, the task's tuning file and the algorithm's backend profile
    under ``algo`` (where ``store_configs`` stores them), each unless its ``# @package`` header says else."""
    # (file, where its keys go without a header)
    files = [(CONFIG_DIR / group / f"{option}.yaml", group) for group, option in choices.items() if option]
    tuning = get_task(choices["task"]).tuning.get(choices["algo"], ()) if choices.get("task") else ()
    files.extend((path, "algo") for path in tuning)
    profile = sim_profiles(choices["algo"]).get(choices.get("sim") or "") if choices.get("algo") else None
    if profile is not None:
        files.append((profile, "algo"))
    for path, default in files:
        if not path.is_file():  # the schema, or a group this project keeps in the ConfigStore
            continue
        package = file_package(path, default)
        tree = OmegaConf.to_container(OmegaConf.create(path.read_text()), resolve=False)
        try:
            check_bools(_leaves(tree, "" if package == "_global_" else package), node)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


PLAIN = (bool, int, float, str)


def task_knobs(name: str) -> dict[str, object]:
    """The knobs ``task.<knob>=value`` sets on task ``name``, with their defaults: its config factory's keyword
    arguments whose default is a plain value (a number, a flag, a word) or None; an argument that takes a structure
    (a ``Randomization``) is the Python API's. The schema's own ``task.*`` keys are not among them."""
    fixed = {f.name for f in dataclasses.fields(TaskSelection)}
    parameters = inspect.signature(get_task(name).make_config).parameters.values()
    return {
        p.name: p.default
        for p in parameters
        if p.name not in fixed and (p.default is None or isinstance(p.default, PLAIN))
    }


def knob_overrides(overrides: list[str]) -> list[str]:
    """``task.<knob>=value`` for a key the schema lacks, as ``++task.knobs.<knob>=value`` (Hydra adds it to the dict
    of knobs); everything else as given. Which knobs the task takes ``check_task_keys`` says, once the task is known."""
    fixed = {f.name for f in dataclasses.fields(TaskSelection)}
    rewritten = []
    for override in overrides:
        key, equals, value = override.partition("=")
        knob = key.removeprefix("task.")
        if equals and key.startswith("task.") and "." not in knob and knob not in fixed:
            override = f"++task.knobs.{knob}={value}"
        elif equals and key.startswith("task.reward_weights."):  # a term of the (empty by default) dict
            override = f"++{key}={value}"
        rewritten.append(override)
    return rewritten


def compose_config(overrides: list[str]) -> TrainConfig:
    """Hydra composition checked against the typed schema; unknown names fail here, before any work."""
    overrides = knob_overrides(overrides)
    algo, task, sim = (_group(overrides, g) for g in ("algo", "task", "sim"))
    experiment = _group(overrides, "+experiment")
    if experiment is not None and experiment not in experiments():
        raise ValueError(f"unknown experiment {experiment!r}; known experiments: {', '.join(experiments())}")
    if algo is not None and algo not in ALGORITHMS:
        raise ValueError(unknown_name("algo", algo, list(ALGORITHMS)))
    algo = algo or DEFAULT_ALGO
    if task is not None and task not in list_tasks():
        raise ValueError(unknown_name("task", task, list_tasks()))
    if sim in (None, "auto"):
        overrides = [o for o in overrides if not o.startswith("sim=")] + [f"sim={default_backend()}"]
    elif sim not in BACKENDS:
        raise ValueError(unknown_name("sim", sim, BACKENDS, "backends"))
    store_configs(algo)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        composed = compose(config_name="train", overrides=overrides, return_hydra_config=True)
    with open_dict(composed):
        choices = OmegaConf.to_container(composed.pop("hydra").runtime.choices)
    base = schema(algo)
    check_file_bools(choices, base)
    leaves = {
        key
        for key in _leaf_keys(OmegaConf.to_container(composed))
        if not key.startswith(("task.knobs.", "task.reward_weights."))
    }
    unknown = sorted(leaves - set(schema_keys(algo)))  # the knobs a task takes are its own: check_task_keys
    if unknown:
        raise ValueError(unknown_key_message(unknown[0]))
    # The values as the user typed them (compose has checked their syntax, and converted them to the schema's types).
    given = OverridesParser.create().parse_overrides(overrides)
    check_bools(((o.key_or_group, o.value()) for o in given if not o.is_delete()), base)
    typed = OmegaConf.merge(OmegaConf.structured(base), composed)
    cfg: TrainConfig = OmegaConf.to_object(typed)
    check_task_keys(cfg)
    validate(cfg)
    # Every knob with its value, the defaults too: the run's config (and each checkpoint's) then says what the run
    # trained on after a default changes, and eval, play and the exports rebuild that task, not today's.
    cfg.task.knobs = {**task_knobs(cfg.task.name), **cfg.task.knobs}
    return cfg


def check_task_keys(cfg: TrainConfig) -> None:
    """``task.*`` keys set for a task that does not take them, and knobs of the wrong type. The schema holds the keys
    of every task since tasks are registered at run time; which of them a task takes, its factory's arguments and
    ``TaskConfig``'s fields say (``override_names``), its knobs its factory's plain arguments (``task_knobs``)."""
    accepted = override_names(cfg.task.name)
    knobs = task_knobs(cfg.task.name)
    own = [f"task.{f.name}" for f in dataclasses.fields(TaskSelection) if f.name in accepted - {"name"}]
    own += [f"task.{knob}" for knob in knobs]
    stray = [key for key in task_overrides(cfg) if key not in accepted or (key in cfg.task.knobs and key not in knobs)]
    if stray:
        raise ValueError(
            f"task.{stray[0]} does not apply to task {cfg.task.name!r}; its task keys are {', '.join(own)}"
        )
    check_reward_weights(cfg.task.name, cfg.task.reward_weights, key="task.reward_weights")
    check_knobs(cfg.task.name, cfg.task.knobs)


def check_knobs(name: str, values: dict[str, object]) -> None:
    """Knobs of task ``name`` given as ``values`` (from a command line, a checkpoint or a policy file's metadata):
    each one the task takes, of its default's type and within its declared range; one line naming the first that is
    not."""
    knobs = task_knobs(name)
    ranges = knob_ranges(name)
    for knob, value in values.items():
        if knob not in knobs:
            raise ValueError(f"task.{knob} does not apply to task {name!r}; its knobs are {', '.join(knobs)}")
        if not _fits(knobs[knob], value):
            raise ValueError(f"task.{knob} must be of the type of its default, {knobs[knob]!r}; got {value!r}")
        if knob in ranges:
            ranges[knob].check(f"task.{knob}", value)


def knob_ranges(name: str) -> dict[str, Range | Choice | Words]:
    """The ranges (or, for a word, the choices) task ``name``'s factory declares for its knobs, in their annotations
    (``Annotated[float, Range(...)]``, as ``unilab.envs.config.NoiseScale``; ``Annotated[str, Choice(...)]``, as
    ``unilab.envs.config.TerrainLayout``); a knob without one is the factory's to check."""
    try:
        parameters = inspect.signature(get_task(name).make_config, eval_str=True).parameters.values()
    except NameError:  # an annotation only a type checker resolves: the factory declares no range it could read
        return {}
    return {
        p.name: meta
        for p in parameters
        for meta in getattr(p.annotation, "__metadata__", ())
        if isinstance(meta, Range | Choice | Words)
    }


def _fits(default: object, value: object) -> bool:
    """Whether ``value`` may replace a knob's ``default``: a flag for a flag, a whole number for a count, a finite
    number for a float, a word for a word (a None default takes anything: the factory checks it)."""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int)
    if isinstance(default, float):
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, str)


def resumed_groups(overrides: list[str]) -> list[str]:
    """``overrides`` with what ``algo.resume``'s checkpoint records and the command line leaves out: its algorithm,
    its task and the settings that fix its networks' shapes, so that ``train algo.resume=PATH`` alone continues
    the run (the command line's own values still win, and a checkpoint that cannot fit them is refused later).
    A note says what was taken (on stdout: stderr's one line is kept for a refusal)."""
    values = last_values(overrides)
    path = resume_path(values)
    if path is None:
        return overrides
    if not Path(path).is_file():
        raise ValueError(f"algo.resume={path}: no such checkpoint file")
    from unilab.run.checkpoint import load_checkpoint, saved_config

    recorded = saved_config(load_checkpoint(Path(path)), Path(path))  # refused in one line where unreadable
    algo = recorded.algo.name
    taken = [f"{group}={name}" for group, name in (("algo", algo), ("task", recorded.task.name)) if group not in values]
    if values.get("algo", algo) == algo:  # the networks' shapes, where they are this algorithm's
        shapes = {f"algo.{key}": getattr(recorded.algo, key) for key in shape_keys(type(recorded.algo))}
        taken += [
            f"{key}={json.dumps(value, separators=(',', ':'))}" for key, value in shapes.items() if key not in values
        ]
    if taken:
        print(f"train: from {path}: {' '.join(taken)}")
    return taken + overrides
