"""``python scripts/eval.py --checkpoint logs/.../model_100.pt`` (same as the ``unilab eval`` command)."""

import sys

from unilab.apps.cli import main

if __name__ == "__main__":
    main(["eval", *sys.argv[1:]])
