"""``python scripts/play.py --checkpoint logs/.../model_100.pt`` (same as the ``unilab play`` command)."""

from unilab.apps.play import main

if __name__ == "__main__":
    main()
