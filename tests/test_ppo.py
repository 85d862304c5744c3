"""PPO: TorchRL's GAE and clipped loss as the learner uses them, the adaptive learning rate, bad config, and short
``train --algo ppo`` runs on both backends (checkpoint, resume, ONNX, eval of the checkpoint)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value.functional import generalized_advantage_estimate

from torchrl_ext.ppo import CapturableClipPPOLoss, gaussian_kl, policy_operator, value_operator
from unilab.apps.compose import compose_config
from unilab.apps.policy import checkpoint_policy
from unilab.apps.train import run
from unilab.core.spec import EnvSpec
from unilab.run.config import task_overrides
from unilab.tasks.registry import make_task
from unilab.train.on_policy import ROLLOUT_KEYS, OnPolicyTrainer, float32_matmuls, rollout_buffer
from unilab.train.ppo.config import PPOConfig
from unilab.train.ppo.learner import PPOLearner

STEPS, ENVS, OBS, CRITIC_OBS, ACT = 6, 5, 7, 9, 3
SMALL = dict(num_envs=ENVS, num_steps_per_env=STEPS, num_mini_batches=3, actor_hidden=[16], critic_hidden=[16])
# A 3-iteration run at the smallest sizes: 4 envs, 8 steps each per rollout, 2 epochs of 2 minibatches.
TINY_PPO = [
    "algo=ppo",
    "algo.num_envs=4",
    "algo.num_steps_per_env=8",
    "algo.num_learning_epochs=2",
    "algo.num_mini_batches=2",
    "algo.actor_hidden=[32,32]",
    "algo.critic_hidden=[32,32]",
    "algo.max_iterations=3",
    "algo.save_interval=3",
    "training.log_interval=1",
    "training.progress=false",
    "training.no_play=true",
]


def make_spec() -> EnvSpec:
    return EnvSpec(ENVS, ACT, {"policy": OBS, "critic": CRITIC_OBS}, torch.device("cpu"), {}, (), False)


def make_learner(**overrides: object) -> PPOLearner:
    return PPOLearner(make_spec(), PPOConfig(**{**SMALL, **overrides}))


def make_rollout(seed: int = 0) -> TensorDict:
    """A rollout with terminations and truncations at fixed places (and one env that does neither)."""
    g = torch.Generator().manual_seed(seed)
    rollout = rollout_buffer(make_spec(), STEPS)
    for key in ("policy", "critic", "action", ("next", "critic"), ("next", "reward")):
        rollout[key] = torch.randn(rollout[key].shape, generator=g)
    terminated, truncated = torch.zeros(STEPS, ENVS, dtype=torch.bool), torch.zeros(STEPS, ENVS, dtype=torch.bool)
    terminated[2, 0] = terminated[4, 1] = terminated[STEPS - 1, 2] = True
    truncated[1, 3] = truncated[3, 0] = truncated[STEPS - 1, 1] = True
    rollout["next", "terminated"] = terminated
    rollout["next", "done"] = terminated | truncated
    return rollout


def test_gae_is_torchrl_s_and_bootstraps_truncations_not_terminations() -> None:
    learner = make_learner()
    rollout = make_rollout()
    batch = learner.prepare(rollout).reshape(STEPS, ENVS)
    critic, gamma, lam = learner.loss.critic, learner.cfg.gamma, learner.cfg.lam
    with torch.no_grad():
        value, next_value = critic(rollout["critic"]), critic(rollout["next", "critic"])
    reward, done, terminated = (rollout["next", key].unsqueeze(-1) for key in ("reward", "done", "terminated"))
    advantage, target = generalized_advantage_estimate(
        gamma, lam, value, next_value, reward, done, terminated, time_dim=0
    )
    torch.testing.assert_close(batch["value_target"], target, rtol=0, atol=0)
    torch.testing.assert_close(batch["state_value"], value, rtol=0, atol=0)
    normalised = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    torch.testing.assert_close(batch["advantage"], normalised)
    # By hand, at an episode's end: a truncation bootstraps the value of its true last observation, a termination
    # does not; neither carries the advantage of the next episode back.
    raw = target - value
    r, v, nv = reward[..., 0], value[..., 0], next_value[..., 0]
    torch.testing.assert_close(raw[1, 3, 0], r[1, 3] + gamma * nv[1, 3] - v[1, 3])
    torch.testing.assert_close(raw[2, 0, 0], r[2, 0] - v[2, 0])
    # Where no episode ends, the recursion runs through: A_t = delta_t + gamma lambda A_{t+1}.
    delta = r[0, 4] + gamma * nv[0, 4] - v[0, 4]
    torch.testing.assert_close(raw[0, 4, 0], delta + gamma * lam * raw[1, 4, 0])


def test_positive_rewards_only_feeds_gae_the_rewards_clipped_at_zero() -> None:
    """The clipped run's batch is the plain run's on the same rollout with its negative rewards set to zero; the
    rollout itself (what the episode statistics read) is left as it was."""
    rollout = make_rollout()
    assert (rollout["next", "reward"] < 0).any() and (rollout["next", "reward"] > 0).any()
    before = rollout["next", "reward"].clone()
    clipped = make_learner(positive_rewards_only=True).prepare(rollout)
    torch.testing.assert_close(rollout["next", "reward"], before, rtol=0, atol=0)
    zeroed = rollout.clone()
    zeroed["next", "reward"] = before.clamp_min(0.0)
    plain = make_learner()
    plain.load_state_dict(make_learner(positive_rewards_only=True).state_dict())
    expected = plain.prepare(zeroed)
    for key in ("value_target", "advantage"):
        torch.testing.assert_close(clipped[key], expected[key], rtol=0, atol=0)
    assert not torch.equal(make_learner().prepare(rollout)["value_target"], clipped["value_target"])


def test_captured_loss_equals_torchrl_s_clip_ppo_loss() -> None:
    """The subclass changes how the entropy and the value clip are reached, not what they compute; its KL is the
    exact Gaussian one."""
    learner = make_learner()
    batch = learner.prepare(make_rollout())
    torch.manual_seed(0)
    with torch.no_grad():  # networks other than the behaviour ones: ratios, both clips and the KL are non-trivial
        for p in learner.loss.parameters():
            p.add_(0.3 * torch.randn_like(p))
    actor, critic = learner.loss.actor, learner.loss.critic
    kwargs = dict(clip_epsilon=0.2, entropy_coeff=0.01, critic_coeff=1.0, loss_critic_type="l2", functional=False)
    ours = CapturableClipPPOLoss(policy_operator(actor), value_operator(critic), clip_value=0.2, **kwargs)(batch)
    stock = ClipPPOLoss(policy_operator(actor), value_operator(critic), clip_value=0.2, **kwargs)(batch)
    for key in ("loss_objective", "loss_critic", "loss_entropy", "entropy", "clip_fraction", "value_clip_fraction"):
        torch.testing.assert_close(ours[key], stock[key], msg=key)
    assert ours["clip_fraction"] > 0 and ours["value_clip_fraction"] > 0
    with torch.no_grad():
        loc, scale = actor.distribution(batch["policy"])
    kl = gaussian_kl(batch["behaviour_loc"], batch["behaviour_scale"], loc, scale).mean()
    torch.testing.assert_close(ours["kl_approx"], kl)
    # Closed form against torch's own KL of two Gaussians.
    old = torch.distributions.Normal(batch["behaviour_loc"], batch["behaviour_scale"])
    expected = torch.distributions.kl_divergence(old, torch.distributions.Normal(loc, scale)).sum(-1).mean()
    torch.testing.assert_close(kl, expected)


def test_acting_and_the_batch_preparation_trace_without_a_graph_break() -> None:
    """``act`` runs inside the rollout graph and ``prepare`` (values, log-probs, TorchRL's GAE) opens the update
    graph: both trace whole (``fullgraph``; a graph break is the CPU-visible form of a host read) and compute what
    they compute eagerly."""
    learner = make_learner()
    rollout = make_rollout()
    eager = learner.prepare(rollout)
    traced = torch.compile(learner.prepare, fullgraph=True, backend="aot_eager")(rollout)
    assert (traced == eager).all()
    obs = TensorDict({"policy": torch.randn(ENVS, OBS)}, [ENVS])
    start = learner._act_rng.clone()
    action = learner.act(obs)
    learner._act_rng.copy_(start)
    torch.testing.assert_close(torch.compile(learner.act, fullgraph=True, backend="aot_eager")(obs), action)
    assert not torch.equal(learner._act_rng, start)  # each call draws new noise


@pytest.mark.parametrize(
    ("kl", "lr", "expected"),
    [(0.05, 1e-3, 1e-3 / 1.5), (0.001, 1e-3, 1.5e-3), (0.0, 1e-3, 1e-3), (0.01, 1e-3, 1e-3), (0.05, 1.2e-5, 1e-5)],
)
def test_adaptive_learning_rate_follows_rsl_rl_s_rule(kl: float, lr: float, expected: float) -> None:
    learner = make_learner(lr=lr)
    learner._adapt_lr(torch.tensor(kl))
    assert learner.optim.param_groups[0]["lr"] is learner.lr  # the tensor the optimiser (and a graph) reads
    assert learner.lr.item() == pytest.approx(expected, rel=1e-6)


def test_an_update_moves_the_weights_the_rate_and_the_normalisers() -> None:
    learner = make_learner(desired_kl=1e-6)  # any step overshoots: the rate must fall
    before = [p.detach().clone() for p in learner.loss.parameters()]
    metrics = learner.update(make_rollout())
    assert all(not torch.equal(a, b) for a, b in zip(before, learner.loss.parameters(), strict=True))
    assert metrics["lr"] < 1e-3 and metrics["kl_mean"] > 0
    assert learner.loss.actor.obs_norm.count == STEPS * ENVS == learner.loss.critic.obs_norm.count


def test_an_update_reports_the_share_of_actions_the_env_clips() -> None:
    rollout = make_rollout()
    action = rollout["action"]
    action.zero_()
    beyond = action.numel() // 4
    action.view(-1)[:beyond] = 1.5
    action.view(-1)[beyond : beyond + 3] = -1.5
    action.view(-1)[-3:] = -1.0  # on the bound: kept as it is
    clipped = make_learner().update(rollout)["action_clipped"].item()
    assert clipped == pytest.approx((beyond + 3) / action.numel())


def test_the_compiled_update_takes_the_eager_steps() -> None:
    """The loss compiles whole (``fullgraph``: no graph break, the CPU-visible form of a host read) and an update
    through it lands on the eager update's weights and learning rate (Inductor on the CPU, 10 to 30 s cold)."""
    eager, compiled = make_learner(), make_learner()
    compiled._loss_fn = torch.compile(compiled.objective, fullgraph=True)
    rollout = make_rollout()
    a, b = eager.update(rollout), compiled.update(rollout)
    for (name, x), y in zip(eager.loss.state_dict().items(), compiled.loss.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-6, msg=name)
    torch.testing.assert_close(a["lr"], b["lr"])
    torch.testing.assert_close(a["kl_mean"], b["kl_mean"])


def test_float32_matmuls_holds_the_precision_inside_and_restores_it_even_on_an_error() -> None:
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    with float32_matmuls("tf32"):
        assert matmul.fp32_precision == "tf32"
        with float32_matmuls("ieee"):
            assert matmul.fp32_precision == "ieee"
        assert matmul.fp32_precision == "tf32"
    assert matmul.fp32_precision == before
    with pytest.raises(KeyError), float32_matmuls("tf32"):
        raise KeyError("inside")
    assert matmul.fp32_precision == before


@pytest.mark.parametrize(("tf32", "expected"), [(True, "tf32"), (False, "ieee")])
def test_the_trainer_runs_its_rollout_and_update_at_the_configured_precision(
    tf32: bool, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``algo.tf32`` reaches CUDA's matmul flag while the trainer acts and learns (where Inductor compiles and the
    graphs record), and nowhere else in the process."""
    from unilab.tasks.registry import make_functional_env

    cfg = PPOConfig(tf32=tf32, num_envs=2, num_steps_per_env=2, num_mini_batches=1, actor_hidden=[8], critic_hidden=[8])
    trainer = OnPolicyTrainer(make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2), cfg)
    seen = []
    act, update = trainer.runner.policy, trainer.learner.update
    monkeypatch.setattr(trainer.runner, "policy", lambda obs: seen.append(("act", precision())) or act(obs))
    monkeypatch.setattr(trainer.learner, "update", lambda batch: seen.append(("update", precision())) or update(batch))
    outside = precision()
    trainer.collect()
    trainer.update()
    assert seen == [("act", expected), ("act", expected), ("update", expected)]
    assert precision() == outside


class _ReplayingGraph:
    """Stands in for a CUDA graph on the CPU: replaying it runs the call it recorded."""

    def __init__(self, fn: Callable[[], object]) -> None:
        self.fn = fn

    def replay(self) -> None:
        self.fn()


def _record_as_on_cuda(trainer: OnPolicyTrainer, monkeypatch: pytest.MonkeyPatch) -> None:
    """``trainer`` records its graphs as on CUDA, on the CPU: eager calls run in place, and each recording is a graph
    that runs its call again when replayed."""
    from unilab.train import loop

    trainer.capture = True
    monkeypatch.setattr(loop, "warm_up", lambda fn, stream: fn())
    monkeypatch.setattr(loop, "record", lambda fn, stream, generators: (_ReplayingGraph(fn), None))
    monkeypatch.setattr(loop, "settle", lambda device: None)


def test_the_rollout_s_first_step_runs_eagerly_and_is_counted_before_the_recording_replays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first collect runs the rollout's first step eagerly, records it and replays the recording for the other
    steps: every env step is one of the rollout's, in its statistics and env steps."""
    from unilab.tasks.registry import make_functional_env

    cfg = PPOConfig(num_envs=2, num_steps_per_env=3, num_mini_batches=1, actor_hidden=[8], critic_hidden=[8])
    trainer = OnPolicyTrainer(make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2), cfg)
    _record_as_on_cuda(trainer, monkeypatch)
    steps, step = [], trainer.runner.step
    monkeypatch.setattr(trainer.runner, "step", lambda: steps.append(1) or step())
    trainer.collect()
    assert len(steps) == 3 and trainer.env_steps == 3 * 2 and trainer._term_steps == 3
    assert set(trainer._graphs) == {"rollout_step"}
    # The episode returns so far are the rollout's rewards alone (no env finished an episode in three steps).
    assert trainer._episodes["count"] == 0
    torch.testing.assert_close(trainer._episode_return, trainer.rollout["next", "reward"].sum(0))
    trainer.collect()
    assert len(steps) == 2 * 3 and trainer.env_steps == 2 * 3 * 2


@pytest.mark.parametrize("recorded", [False, True])
def test_each_step_of_a_rollout_writes_its_own_row_in_order(monkeypatch: pytest.MonkeyPatch, recorded: bool) -> None:
    """The rollout's one step, eager or recorded once and replayed, writes row after row, and the next rollout starts
    again at the first row."""
    from unilab.tasks.registry import make_functional_env

    cfg = PPOConfig(num_envs=2, num_steps_per_env=3, num_mini_batches=1, actor_hidden=[8], critic_hidden=[8])
    trainer = OnPolicyTrainer(make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2), cfg)
    if recorded:
        _record_as_on_cuda(trainer, monkeypatch)
    seen, step = [], trainer.runner.step
    monkeypatch.setattr(trainer.runner, "step", lambda: seen.append(step().clone()) or seen[-1])
    for _ in range(2):
        trainer.collect()
        for row, transition in enumerate(seen[-3:]):
            for key in ROLLOUT_KEYS:
                torch.testing.assert_close(trainer.rollout[row][key], transition[key], rtol=0, atol=0)
    assert len(seen) == 6  # the recording's first (eager) call is the rollout's first step


def precision() -> str:
    return torch.backends.cuda.matmul.fp32_precision


def test_a_loaded_learner_continues_with_the_saved_rate_in_the_tensor_its_optimiser_reads() -> None:
    trained = make_learner(desired_kl=1e-6)
    trained.update(make_rollout())
    loaded = make_learner()
    loaded.load_state_dict(trained.state_dict())
    assert loaded.lr.item() == trained.lr.item() < 1e-3
    assert loaded.optim.param_groups[0]["lr"] is loaded.lr  # so the schedule keeps steering the optimiser
    for (name, a), b in zip(trained.loss.state_dict().items(), loaded.loss.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "algo.num_mini_batches=3",
            "algo.num_mini_batches=3 must divide the rollout's algo.num_envs * algo.num_steps_per_env = 32 rows",
        ),
        ("algo.lr_schedule=cosine", "algo.lr_schedule must be one of adaptive, fixed, got 'cosine'"),
    ],
)
def test_bad_ppo_config_is_one_line_before_any_work(override: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        compose_config([*TINY_PPO, override])
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


# Per walk: its PPO tuning's envs and action-rate weight, the walk's own weight, and the experiment giving mjlab's back.
WALK_TUNINGS = {
    "g1_walk_flat": (8192, -0.5, -4.0, "g1_ppo_mjlab"),
    "g1_walk_flat_rand": (8192, -0.5, -4.0, "g1_ppo_mjlab"),
    "g1_walk_rough": (8192, -0.5, -4.0, "g1_ppo_mjlab"),
    "go1_walk_flat": (4096, -0.125, -1.0, "go1_ppo_mjlab"),
    "go1_walk_rough": (4096, -0.125, -1.0, "go1_ppo_mjlab"),
}
# The physics knobs a walk's PPO tuning sets (the G1's flat walks: mjlab's solver caps and a flat walk's rows).
FLAT_G1_PHYSICS = {"solver_iterations": 10, "ls_iterations": 20, "njmax": 256}
PPO_PHYSICS = {"g1_walk_flat": FLAT_G1_PHYSICS, "g1_walk_flat_rand": FLAT_G1_PHYSICS}
# The physics knobs a walk's SAC tuning sets (the G1's rough walk: the same caps and a flat walk's buffers).
SAC_PHYSICS = {"g1_walk_rough": {"solver_iterations": 10, "ls_iterations": 20, "nconmax": 64, "njmax": 400}}


@pytest.mark.parametrize("task", sorted(WALK_TUNINGS))
def test_the_walks_tuning_for_ppo_and_mjlab_s_settings_one_override_away(task: str) -> None:
    envs, rate, own_rate, experiment = WALK_TUNINGS[task]
    own_weight = make_task(task).rewards["penalty_action_rate"].weight
    tuned = compose_config(["algo=ppo", f"task={task}", "sim=mjwarp"])
    assert (tuned.algo.num_envs, tuned.algo.init_noise_std) == (envs, 0.25)
    assert tuned.task.reward_weights == {"penalty_action_rate": rate} and own_weight == own_rate
    physics = PPO_PHYSICS.get(task, {})
    built, own = make_task(tuned.task.name, **task_overrides(tuned)).physics, make_task(task).physics
    assert (built.iterations, built.ls_iterations, built.njmax) == (
        physics.get("solver_iterations", own.iterations),
        physics.get("ls_iterations", own.ls_iterations),
        physics.get("njmax", own.njmax),
    )  # what the env's physics is built with: the rough walk and the Go1 keep their own
    rows = compose_config(["algo=ppo", f"task={task}", "sim=mjwarp", "task.njmax=300"])
    assert make_task(rows.task.name, **task_overrides(rows)).physics.njmax == 300  # the command line wins here too
    assert (
        make_task(tuned.task.name, **task_overrides(tuned)).rewards["penalty_action_rate"].weight == rate
    )  # what the env is built with
    mjlab = compose_config(["algo=ppo", f"task={task}", "sim=mjwarp", f"+experiment={experiment}"])
    assert (mjlab.algo.num_envs, mjlab.algo.init_noise_std) == (4096, PPOConfig().init_noise_std) == (4096, 1.0)
    assert make_task(mjlab.task.name, **task_overrides(mjlab)).rewards["penalty_action_rate"].weight == own_weight
    typed = compose_config(["algo=ppo", f"task={task}", "sim=mjwarp", "task.reward_weights.penalty_action_rate=-2"])
    assert (
        make_task(typed.task.name, **task_overrides(typed)).rewards["penalty_action_rate"].weight == -2.0
    )  # the command line wins over the tuning
    # The CPU profile's sizes still win over the tuning's envs; SAC's settings, weights and physics are its own.
    assert compose_config(["algo=ppo", f"task={task}", "sim=mujoco"]).algo.num_envs == 16
    sac = compose_config(["algo=sac", f"task={task}", "sim=mjwarp"])
    assert sac.task.reward_weights == {} and sac.algo.num_envs == 2048
    sac_physics = make_task(task, **SAC_PHYSICS.get(task, {})).physics
    assert make_task(sac.task.name, **task_overrides(sac)).physics == sac_physics


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_three_ppo_iterations_write_a_complete_run_that_resumes(tmp_path: Path, sim: str) -> None:
    run_dir = tmp_path / "run"
    summary = run(compose_config([*TINY_PPO, f"sim={sim}", f"training.log_dir={run_dir}"]))
    data = json.loads((run_dir / "run_summary.json").read_text())
    assert summary.status == "completed" == data["status"] and data["algo"] == "ppo"
    # An iteration is a rollout of 8 steps of 4 envs and its updates; the tail counts both.
    assert data["completed_iterations"] == 3 and data["total_env_steps"] == 3 * 8 * 4
    assert data["tail_iteration_count"] == 2 and data["tail_env_steps_per_sec"] > 0
    assert set(data["tail_seconds_per_iteration"]) == {"collect", "update"}
    assert {name: data["config"]["task"]["knobs"][name] for name in FLAT_G1_PHYSICS} == FLAT_G1_PHYSICS  # the tuning's
    checkpoint = torch.load(run_dir / "model_3.pt", weights_only=True)
    assert checkpoint["env_steps"] == 96 and checkpoint["loss"]["actor.obs_norm.count"] == 96

    # The exported policy is the checkpoint's deterministic actor, normaliser included.
    cfg = compose_config([*TINY_PPO, f"sim={sim}"])
    from unilab.tasks.registry import make_functional_env

    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2)
    policy = checkpoint_policy(checkpoint, cfg, env, "g1_walk_flat")
    obs = torch.randn(2, env.obs_dims["policy"])
    session = ort.InferenceSession(str(run_dir / "policy.onnx"))
    action = session.run(["action"], {"obs": obs.numpy()})[0]
    torch.testing.assert_close(torch.as_tensor(action), policy(obs).detach(), atol=1e-4, rtol=0)

    resumed = tmp_path / "resumed"
    more = [*TINY_PPO, f"sim={sim}", "algo.max_iterations=4", f"algo.resume={run_dir / 'model_3.pt'}"]
    summary = run(compose_config([*more, f"training.log_dir={resumed}", "training.export_onnx=false"]))
    assert summary.completed_iterations == 4
    assert torch.load(resumed / "model_4.pt", weights_only=True)["env_steps"] == 4 * 32


def test_a_stop_signal_ends_a_ppo_run_with_a_final_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unilab.train.on_policy import OnPolicyTrainer

    update, calls = OnPolicyTrainer.update, []

    def signalled(self):
        calls.append(None)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return update(self)

    monkeypatch.setattr(OnPolicyTrainer, "update", signalled)
    run_dir = tmp_path / "run"
    overrides = [*TINY_PPO, "sim=mujoco", "algo.max_iterations=10", "training.export_onnx=false"]
    summary = run(compose_config([*overrides, f"training.log_dir={run_dir}"]))
    assert summary.status == "interrupted" and summary.stopped_by == "SIGTERM"
    assert summary.completed_iterations == 2
    assert torch.load(run_dir / "model_2.pt", weights_only=True)["iteration"] == 2


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_captured_update_equals_the_eager_one_on_cuda() -> None:
    """The update block recorded as a CUDA graph and replayed takes the steps the eager block takes: the same
    weights, learning rate and normalisers after two updates (the first is the graph's warm-up)."""
    from unilab.core.cuda_graphs import record, warm_up

    spec = EnvSpec(ENVS, ACT, {"policy": OBS, "critic": CRITIC_OBS}, torch.device("cuda"), {}, (), True)
    cfg = PPOConfig(compile=False, **SMALL)
    eager, captured = PPOLearner(spec, cfg), PPOLearner(spec, cfg)
    rollouts = [make_rollout(seed).to("cuda") for seed in (1, 2)]
    for rollout in rollouts:
        eager.update(rollout)
    static = rollouts[0].clone()
    stream = torch.cuda.Stream()
    warm_up(lambda: captured.update(static), stream)
    graph, _ = record(lambda: captured.update(static), stream)
    static.update_(rollouts[1])
    graph.replay()
    torch.cuda.synchronize()
    for (name, a), b in zip(eager.loss.state_dict().items(), captured.loss.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    torch.testing.assert_close(eager.lr, captured.lr)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_ppo_on_cuda_records_a_rollout_step_and_the_update_as_two_graphs(tmp_path: Path) -> None:
    """The canonical path at a small size: compiled, captured, trained end to end; the rollout's step graph then
    writes every row of the buffer in each rollout and the update graph keeps moving the weights."""
    from unilab.tasks.registry import make_functional_env
    from unilab.train.on_policy import OnPolicyTrainer

    sizes = ["algo=ppo", "sim=mjwarp", "algo.num_envs=256", "algo.max_iterations=5", "training.progress=false"]
    summary = run(compose_config([*sizes, "training.no_play=true", f"training.log_dir={tmp_path / 'run'}"]))
    data = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert summary.status == "completed" and data["total_env_steps"] == 5 * 24 * 256
    assert data["tail_env_steps_per_sec"] > 0

    cfg = compose_config(sizes).algo
    trainer = OnPolicyTrainer(make_functional_env("g1_walk_flat", sim="mjwarp", num_envs=256, device="cuda"), cfg)
    for _ in range(2):  # the first records both graphs
        trainer.collect()
        trainer.update()
    assert list(trainer.graphs) == ["rollout_step", "update"]
    before = trainer.rollout["policy"].clone(), [p.detach().clone() for p in trainer.loss.parameters()]
    trainer.collect()
    metrics = trainer.update()
    torch.cuda.synchronize()
    assert all(not torch.equal(old, new) for old, new in zip(before[0], trainer.rollout["policy"], strict=True))
    assert trainer._row.item() == 0  # the next rollout starts at the first row
    assert all(not torch.equal(a, b) for a, b in zip(before[1], trainer.loss.parameters(), strict=True))
    assert all(torch.isfinite(value).all() for value in metrics.values())
    trainer.runner.check()
