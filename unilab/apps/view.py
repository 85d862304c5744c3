"""``view``: a web viewer of a trained policy running live, in a browser on this machine or through an SSH tunnel.

The page (viser) shows the robots' geoms as the physics moves them, with play/pause, reset, the playback speed,
the walking command as sliders (for a task that has one) and the clip (for a tracking task). The server listens
on loopback only, unless ``--host`` says otherwise: from another machine, forward the port
(``ssh -L 8080:localhost:8080 host``) and open http://localhost:8080.
"""

from __future__ import annotations

import ipaddress
import sys
import threading
from pathlib import Path

import torch

from unilab.apps.args import ArgumentParser, InputError, check_rollout_args, fail
from unilab.apps.play import shown_overrides
from unilab.apps.policy import REFUSALS, policy_source
from unilab.apps.rollout import check_rollout_memory, task_of
from unilab.tasks.registry import build_env, list_tasks
from unilab.viewer.controls import Controls, build_panel
from unilab.viewer.live import LiveSession, clip_names
from unilab.viewer.scene import RobotScene
from unilab.viewer.server import LOOPBACK, PortUnavailable, check_port, serve, url

SIMS = ("mujoco", "mjwarp")
MAX_VIEW_ENVS = 1024  # envs stepped live; only the first few are drawn
MAX_SHOWN = 16  # robots drawn side by side for a walking task


def exposure_warning(host: str, port: int) -> str | None:
    """The line that says a page is served beyond this machine (``--host 0.0.0.0``, an outward address): asked for,
    so served, but no one should open a page to a network unawares. None on a loopback address."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        loopback = host == "localhost"
    if loopback:
        return None
    return (
        f"viewer: warning: --host {host} serves the page beyond this machine: anyone who can reach port {port} "
        f"can watch and control the policy (the default, {LOOPBACK}, serves this machine alone)"
    )


def start(
    checkpoint: Path | None,
    onnx: Path | None,
    task: str | None = None,
    sim: str = "mujoco",
    num_envs: int | None = None,
    host: str = LOOPBACK,
    port: int = 8080,
    seed: int = 0,
    paused: bool = False,
) -> tuple[LiveSession, threading.Event, threading.Thread, str]:
    """Check the inputs, build the env, the policy and the page, and start the live loop on its own thread;
    returns the session, the event that stops it, its thread and the page's address. Raises one of ``REFUSALS`` or
    ``PortUnavailable`` before any work where an input is wrong (a missing policy, an unknown task, a port in use)."""
    if onnx is not None and not Path(onnx).is_file():
        raise InputError(f"onnx policy not found: {onnx}")
    check_port(host, port)
    source = policy_source(checkpoint, onnx, task)
    overrides = shown_overrides(source.task, source.overrides, 0.0)
    device = "cuda" if sim == "mjwarp" and torch.cuda.is_available() else "cpu"
    config = task_of(source.task, overrides)
    clips = clip_names(config)
    if num_envs is None:  # a tracking task plays every clip at once, so the clip menu switches without a restart
        num_envs = min(len(clips), MAX_VIEW_ENVS) if clips else 4
    check_rollout_memory(config, num_envs, device, record=False)
    env = build_env(config, sim=sim, num_envs=num_envs, device=device)
    policy = source.policy(env)
    server = serve(host, port)
    controls = Controls(playing=not paused)
    scene = RobotScene(server, env.sim.model, 1 if clips else min(num_envs, MAX_SHOWN))
    session = LiveSession(env, policy, scene, controls, seed)
    title = f"**{source.task}** · {source.path.name} · {sim}"
    build_panel(server, controls, session.command, clips[: env.num_envs], title)
    stop = threading.Event()
    thread = threading.Thread(target=session.run, args=(stop,), name="view-loop", daemon=True)
    thread.start()
    return session, stop, thread, url(server)


def main(argv: list[str] | None = None) -> None:
    """Console command ``unilab view``: serves until Ctrl-C (or ``--seconds``)."""
    parser = ArgumentParser(prog="unilab view", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=Path, help="model_<it>.pt written by train")
    source.add_argument("--onnx", type=Path, help="policy.onnx written by train")
    parser.add_argument("--task", default=None, help=f"one of {', '.join(list_tasks())} (default: the run's task)")
    parser.add_argument("--sim", choices=SIMS, default="mujoco", help="physics: C MuJoCo on the CPU, or mjwarp")
    parser.add_argument("--num-envs", type=int, default=None, help="envs stepped (default 4; tracking: one a clip)")
    parser.add_argument("--host", default=LOOPBACK, help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--paused", action="store_true", help="start paused, at the first episode's start")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this long (default: at Ctrl-C)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check_rollout_args(parser.prog, 1 if args.num_envs is None else args.num_envs, args.seed)
    if args.num_envs is not None and args.num_envs > MAX_VIEW_ENVS:
        fail(parser.prog, f"--num-envs must be at most {MAX_VIEW_ENVS} for a live view, got {args.num_envs}")
    if args.seconds is not None and not 0.0 < args.seconds < float("inf"):
        fail(parser.prog, f"--seconds must be a finite number > 0, got {args.seconds}")
    try:
        session, stop, thread, address = start(
            args.checkpoint, args.onnx, args.task, args.sim, args.num_envs, args.host, args.port, args.seed, args.paused
        )
    except (*REFUSALS, PortUnavailable) as exc:
        fail(parser.prog, exc)
    port = session.scene.server.get_port()  # the one asked for, or the free one port 0 found
    print(f"viewer: {address} (over SSH: ssh -L {port}:localhost:{port} <this host>; Ctrl-C stops)")
    warning = exposure_warning(args.host, port)
    if warning is not None:
        print(warning, file=sys.stderr)
    try:
        thread.join(timeout=args.seconds)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        thread.join(timeout=5.0)
        session.scene.server.stop()
    if session.error is not None:  # a bug, not an input: its traceback
        raise session.error
