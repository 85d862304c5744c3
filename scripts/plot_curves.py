"""``python scripts/plot_curves.py logs/<run> [--out curves.png]``: learning curves of one run as a PNG."""

from unilab.apps.curves import main

if __name__ == "__main__":
    main()
