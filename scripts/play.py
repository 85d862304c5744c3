"""``python scripts/play.py --checkpoint logs/.../model_100.pt`` (same as the ``unilab play`` command)."""

import sys

from unilab.apps.cli import main

if __name__ == "__main__":
    main(["play", *sys.argv[1:]])
