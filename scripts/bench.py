"""Benchmarks: ``python scripts/bench.py physics --sim mjwarp --num-envs 2048,8192``."""

import sys

from unilab.apps.cli import main

if __name__ == "__main__":
    main(["bench", *sys.argv[1:]])
