"""The viser server, refused in one line where its port is taken.

viser moves on to the next free port when the one asked for is taken, which would put the page somewhere the
user's SSH tunnel does not lead; so the port is tried first, and a server that bound another one is stopped.
"""

from __future__ import annotations

import socket

import viser

LOOPBACK = "127.0.0.1"
MAX_PORT = 65535


class PortUnavailable(ValueError):
    """The viewer cannot be served on the port asked for; a command reports it as its one-line error."""


def check_port(host: str, port: int) -> None:
    """Raise ``PortUnavailable`` (one line) unless ``port`` on ``host`` can be listened on now; port 0 picks a free
    one."""
    if not 0 <= port <= MAX_PORT:
        raise PortUnavailable(f"port must be in [0, {MAX_PORT}], got {port}")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, port))
    except OSError as exc:
        raise PortUnavailable(
            f"cannot serve the viewer on {host}:{port}: {exc.strerror or exc}; pick another port"
        ) from None


def serve(host: str, port: int) -> viser.ViserServer:
    """A viser server on exactly ``host:port`` (any free port for 0)."""
    check_port(host, port)
    server = viser.ViserServer(host=host, port=port, verbose=False)
    if port and server.get_port() != port:  # taken between the check and the bind
        server.stop()
        raise PortUnavailable(f"cannot serve the viewer on {host}:{port}: the port was taken; pick another port")
    return server


def url(server: viser.ViserServer) -> str:
    return f"http://{server.get_host()}:{server.get_port()}"
