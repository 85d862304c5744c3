"""``python scripts/eval.py --checkpoint logs/.../model_100.pt`` (same as the ``unilab eval`` command)."""

from unilab.apps.eval import main

if __name__ == "__main__":
    main()
