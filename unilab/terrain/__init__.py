"""Terrain as data: a seeded grid of sub-terrains (``generator``) and its build into a scene (``scene``)."""

from unilab.terrain.generator import TERRAIN_TYPES, Terrain, TerrainConfig, generate
from unilab.terrain.scene import terrain_model, terrain_spec

__all__ = ["TERRAIN_TYPES", "Terrain", "TerrainConfig", "generate", "terrain_model", "terrain_spec"]
