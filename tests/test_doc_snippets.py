"""The functional-env page's first example runs as written (given an action), so its imports name real modules."""

from __future__ import annotations

import re
from pathlib import Path

import torch

PAGE = Path(__file__).resolve().parents[1] / "docs" / "functional_env.md"


def test_the_functional_env_contract_example_runs() -> None:
    first = re.search(r"```python\n(.*?)```", PAGE.read_text(), re.DOTALL).group(1)
    names = {"action": torch.zeros(16, 29)}
    exec(first, names)
    assert names["transition"]["next", "reward"].shape == (16,)
