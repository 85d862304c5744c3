"""Benchmarks: ``python scripts/bench.py physics --sim mjwarp --num-envs 2048,8192``."""

from unilab.apps.bench import main

if __name__ == "__main__":
    main()
