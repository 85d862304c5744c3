"""``algo.actor_average``: an exponential average of the off-policy actor's weights, stepped at each actor step, that
eval, play and the ONNX export run in the actor's place; the actor itself still acts, learns and resumes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch

from tests.test_train import small_algo, tiny
from unilab.apps.compose import compose_config
from unilab.apps.eval import evaluate, format_table
from unilab.apps.policy import policy_source
from unilab.apps.train import run
from unilab.run.checkpoint import CheckpointError, load_checkpoint
from unilab.tasks.registry import make_functional_env
from unilab.train.learner import ACTOR_AVERAGE, learner_class
from unilab.train.prewarm import zero_batch


def _learner(algo: str, *more: str):
    cfg = small_algo(algo, *more)
    spec = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu").spec()
    return learner_class(cfg)(spec, cfg), spec


def _batch(spec, rows: int) -> torch.Tensor:
    """Replay rows of random observations and actions: zeros would leave the actor's gradient at nothing."""
    batch = zero_batch(spec, rows)
    generator = torch.Generator().manual_seed(0)
    for key in ("policy", "critic", "action", ("next", "policy"), ("next", "critic")):
        batch.set(key, torch.randn(batch.get(key).shape, generator=generator).clamp(-1, 1))
    return batch


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_each_actor_step_moves_the_average_its_factor_of_the_way_to_the_actor(algo: str) -> None:
    learner, spec = _learner(algo, "algo.actor_average=0.25", "algo.updates_per_step=1", "algo.policy_frequency=1")
    actor = learner.loss.actor
    before = {name: p.detach().clone() for name, p in actor.named_parameters()}
    learner.update(_batch(spec, learner.minibatch))
    after = dict(actor.named_parameters())
    average = learner.state_dict()[ACTOR_AVERAGE]
    assert average.keys() == before.keys()
    moved = [name for name in before if not torch.equal(after[name], before[name])]
    assert moved, "the actor step changed no weight"
    for name in before:
        expected = before[name] + 0.25 * (after[name].detach() - before[name])
        torch.testing.assert_close(average[name], expected, rtol=0, atol=1e-7)
    deployed = dict(learner.deployed_actor().named_parameters())
    assert all(torch.equal(deployed[name], average[name]) for name in before)
    assert learner.deployed_actor() is not actor and all(p.requires_grad for p in actor.parameters())


def test_the_average_follows_the_weights_flashsac_projects_back_onto_the_unit_sphere() -> None:
    """FlashSAC re-projects its weights after the minibatch's steps; an average taken before that would follow
    weights the actor never keeps. At a factor of 1 the average is the actor, bit for bit."""
    learner, spec = _learner("flashsac", "algo.actor_average=1", "algo.updates_per_step=1", "algo.policy_frequency=1")
    learner.update(_batch(spec, learner.minibatch))
    average = learner.state_dict()[ACTOR_AVERAGE]
    assert all(torch.equal(average[name], p) for name, p in learner.loss.actor.named_parameters())


def test_without_a_factor_nothing_is_kept_and_the_actor_itself_is_deployed() -> None:
    learner, spec = _learner("sac")
    learner.update(_batch(spec, learner.minibatch * learner.cfg.updates_per_step))
    assert ACTOR_AVERAGE not in learner.state_dict() and learner.deployed_actor() is learner.loss.actor


def test_a_resume_keeps_the_average_and_one_from_a_run_without_starts_it_at_the_actor() -> None:
    learner, spec = _learner("sac", "algo.actor_average=0.5", "algo.policy_frequency=1")
    learner.update(_batch(spec, learner.minibatch * learner.cfg.updates_per_step))
    state = learner.state_dict()
    resumed, _ = _learner("sac", "algo.actor_average=0.5", "algo.policy_frequency=1")
    resumed.load_state_dict(state)
    assert all(torch.equal(resumed.state_dict()[ACTOR_AVERAGE][k], v) for k, v in state[ACTOR_AVERAGE].items())
    fresh, _ = _learner("sac", "algo.actor_average=0.5", "algo.policy_frequency=1")
    fresh.load_state_dict({key: value for key, value in state.items() if key != ACTOR_AVERAGE})
    live = dict(fresh.loss.actor.named_parameters())
    assert all(torch.equal(fresh.state_dict()[ACTOR_AVERAGE][k], live[k]) for k in live)


@pytest.fixture(scope="module")
def averaged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("average")
    overrides = ["algo.actor_average=0.3", "algo.max_iterations=3", "training.export_onnx=true"]
    assert run(compose_config(tiny(tmp, "mujoco", *overrides))).status == "completed"
    return tmp / "run"


def test_the_checkpoint_and_the_export_run_the_average(averaged_run: Path) -> None:
    ckpt = load_checkpoint(averaged_run / "model_3.pt")
    average = ckpt[ACTOR_AVERAGE]
    live = {k[len("actor.") :]: v for k, v in ckpt["loss"].items() if k.startswith("actor.")}
    assert average.keys() <= live.keys() and any(not torch.equal(average[k], live[k]) for k in average)
    source = policy_source(averaged_run / "model_3.pt", None, None)
    env = make_functional_env(source.task, sim="mujoco", num_envs=2, device="cpu", **source.overrides)
    policy = source.policy(env)
    assert all(torch.equal(dict(policy.named_parameters())[k], v) for k, v in average.items())
    obs = torch.randn(2, env.spec().obs_dims["policy"], generator=torch.Generator().manual_seed(1))
    session = ort.InferenceSession(str(averaged_run / "policy.onnx"), providers=["CPUExecutionProvider"])
    (exported,) = session.run(None, {"obs": obs.numpy()})
    with torch.no_grad():
        np.testing.assert_allclose(exported, policy(obs).numpy(), atol=1e-5)


def test_eval_says_which_actor_it_judged(averaged_run: Path, tmp_path: Path) -> None:
    averaged = evaluate(averaged_run / "model_3.pt", None, num_envs=2, episodes_s=0.1, out=tmp_path / "average")
    ckpt = torch.load(averaged_run / "model_3.pt", weights_only=True)
    del ckpt[ACTOR_AVERAGE]
    torch.save(ckpt, tmp_path / "model_3.pt")
    live = evaluate(tmp_path / "model_3.pt", None, num_envs=2, episodes_s=0.1, out=tmp_path / "live")
    assert (averaged["weights"], live["weights"]) == ("average", "actor")
    assert "the actor's average" in format_table(averaged).splitlines()[0]
    assert "average" not in format_table(live).splitlines()[0]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda avg: avg.clear(), "is not a dict of tensors"),
        (lambda avg: avg.update(ghost=torch.zeros(3)), "entry 'ghost' is not one of the actor's weights"),
        (lambda avg: avg.update({k: v[:1] for k, v in list(avg.items())[:1]}), "is not one of the actor's weights"),
        (lambda avg: next(iter(avg.values())).fill_(float("nan")), "non-finite weights"),
    ],
    ids=["empty", "unknown", "shape", "nan"],
)
def test_a_malformed_average_is_refused_in_one_line(averaged_run: Path, tmp_path: Path, edit, message: str) -> None:
    ckpt = torch.load(averaged_run / "model_3.pt", weights_only=True)
    edit(ckpt[ACTOR_AVERAGE])
    torch.save(ckpt, tmp_path / "model_3.pt")
    with pytest.raises(CheckpointError, match=message):
        load_checkpoint(tmp_path / "model_3.pt")


def test_the_factor_is_refused_outside_its_range() -> None:
    with pytest.raises(ValueError, match=r"algo.actor_average must be in \[0, 1\]"):
        compose_config(["algo=sac", "task=g1_walk_flat", "sim=mujoco", "algo.actor_average=1.5"])


@pytest.mark.gpu
def test_the_captured_update_steps_the_average_as_eager_code_does() -> None:
    """The average's step is part of the update block's CUDA graph: each replay moves it its factor of the way to
    the actor that replay left."""
    from unilab.train.off_policy import OffPolicyTrainer

    sizes = ["algo.num_envs=256", "algo.batch_size=1024", "algo.replay_buffer_n=16", "algo.learning_starts=2"]
    once = ["algo.updates_per_step=1", "algo.policy_frequency=1", "algo.actor_average=0.25"]
    cfg = compose_config(["sim=mjwarp", *sizes, *once, "algo.compile=false"]).algo
    trainer = OffPolicyTrainer(make_functional_env("g1_walk_flat", sim="mjwarp", num_envs=256, device="cuda"), cfg)
    assert trainer.capture
    while not trainer.ready:
        trainer.collect()
    for _ in range(3):  # records the graphs, then replays them
        trainer.collect()
        trainer.update()
    torch.cuda.synchronize()
    before = {k: v.clone() for k, v in trainer.state_dict()[ACTOR_AVERAGE].items()}
    trainer.collect()
    trainer.update()
    torch.cuda.synchronize()
    actor = dict(trainer.loss.actor.named_parameters())
    after = trainer.state_dict()[ACTOR_AVERAGE]
    assert any(not torch.equal(after[k], before[k]) for k in before)
    for name, value in before.items():
        torch.testing.assert_close(after[name], value + 0.25 * (actor[name].detach() - value))


def test_a_resume_that_drops_the_average_says_so(averaged_run: Path, tmp_path: Path, capsys) -> None:
    overrides = [f"algo.resume={averaged_run / 'model_3.pt'}", "algo.max_iterations=4"]
    config = tiny(tmp_path, "mujoco", *overrides, "training.export_onnx=false")
    assert run(compose_config(config)).status == "completed"
    assert "kept an average of its actor, and this run keeps none" in capsys.readouterr().err
    assert ACTOR_AVERAGE not in load_checkpoint(tmp_path / "run" / "model_4.pt")
