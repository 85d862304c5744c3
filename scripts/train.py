"""``python scripts/train.py algo=sac task=g1_walk_flat sim=mjwarp key=value ...`` (same as the ``train`` command)."""

from unilab.apps.cli import train

if __name__ == "__main__":
    train()
