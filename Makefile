# Every target sets up .venv itself, so each works on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU machines take this build from local disk; a CUDA machine gets PyPI's CUDA build.
TORCH ?= torch==2.13.0

.PHONY: setup run test test-all check format

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

# The main job: SAC on g1_walk_flat with this machine's defaults (mjwarp on CUDA, else C MuJoCo, small sizes).
run: setup
	$(VENV)/bin/train

test: setup
	$(PY) -m pytest -m "not slow"

test-all: setup
	$(PY) -m pytest

check: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_sizes.py

format: setup
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .
