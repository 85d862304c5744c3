# Every target sets up .venv itself, so each works on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python
# CPU machines take this build from local disk; a CUDA machine gets PyPI's CUDA build.
TORCH ?= torch==2.13.0

.PHONY: setup run test test-all check format

setup: $(VENV)/.installed

# pip -q is silent for minutes; a line before each step says what the wait is. setuptools warns on every editable
# install about folders named like the package (docs/custom_task.md says where that matters); the warning is left out.
$(VENV)/.installed: pyproject.toml
	@echo "setup: creating $(VENV)"
	python3 -m venv $(VENV)
	@echo "setup: upgrading pip"
	$(PY) -m pip install -q --upgrade pip
	@echo "setup: installing $(TORCH) (the largest download: a minute or more)"
	$(PY) -m pip install -q "$(TORCH)"
	@echo "setup: installing unilab and its dependencies (torchrl, MuJoCo, MuJoCo Warp, ...: a minute or more)"
	PYTHONWARNINGS="ignore:Editable installation" $(PY) -m pip install -q -e ".[dev]"
	touch $@

# The main job: SAC on g1_walk_flat with this machine's defaults (mjwarp on CUDA, else C MuJoCo, small sizes).
run: setup
	$(VENV)/bin/train

# Two workers, each taking whole test files (module fixtures build once): the suite waits on subprocesses and
# compiles, so a 2-core machine runs it in about half the time one process takes.
test: setup
	$(PY) -m pytest -m "not slow" -n 2 --dist loadfile

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
