"""Motion clips shipped as package data (robot models live in their robot's package, ``unilab.robots``)."""

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent
