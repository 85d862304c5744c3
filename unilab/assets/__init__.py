"""Robot models and motion clips shipped as package data."""

from pathlib import Path

ASSETS_DIR = Path(__file__).resolve().parent
G1_DIR = ASSETS_DIR / "robots" / "g1"
G1_FLAT_SCENE = G1_DIR / "scene_flat.xml"
