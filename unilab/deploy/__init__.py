"""The deployment runtime: an exported policy run on a robot with NumPy and onnxruntime alone, no torch.

``Policy`` (``policy.py``) opens ``policy.onnx``, reads what training did from its metadata (``schema.py``), rebuilds
the observation (``observation.py``) and turns actions into joint targets; a robot is anything that implements
``Robot`` (``robot.py``), and ``loop.py`` runs the two at the control rate. For simulation, ``mujoco_robot.py`` is a
robot in C MuJoCo and ``check.py`` the sim-to-sim check (``unilab deploy check``); they need the ``mujoco`` package,
which the rest does not import.

This package imports nothing else of unilab (an import contract in ``pyproject.toml`` holds it to that), so it runs
where only those three are installed (``docs/deploy.md``: a robot's computer).
"""

from unilab.deploy.policy import Policy, ReadingsError
from unilab.deploy.robot import JointTargets, Readings, Robot
from unilab.deploy.schema import DeployError, DeployMetadata, MetadataError

__all__ = [
    "DeployError",
    "DeployMetadata",
    "JointTargets",
    "MetadataError",
    "Policy",
    "Readings",
    "ReadingsError",
    "Robot",
]
