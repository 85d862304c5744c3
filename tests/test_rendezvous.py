"""A rank whose rendezvous never answers gives up within the collective timeout, in one line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from test_distributed import SIZES

REPO = Path(__file__).resolve().parents[1]


def test_a_rendezvous_that_accepts_and_never_answers_ends_the_rank_in_one_line(tmp_path: Path) -> None:
    """What a port held by another program looks like to rank 1: the connection is taken, no reply ever comes."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(silent.getsockname()[1]),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "RANK": "1",
            "LOCAL_RANK": "1",
        }
        command = [sys.executable, "scripts/train.py", *SIZES, f"training.log_dir={tmp_path / 'run'}"]
        done = subprocess.run(
            [*command, "training.dist_timeout_s=3"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
        )
    errors = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1, done.stderr[-2000:]
    assert len(errors) == 1 and errors[0].startswith("train: error: rank 1 of 2: joining the process group failed")
    assert "did not answer in 8 s" in errors[0]
