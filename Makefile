# Everything a newcomer needs, from a machine with only Python 3 and pip.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Where torch comes from. Empty (the default): pip's configured index. On Linux
# x86-64, PyPI's torch wheel is the CUDA build (several GB with its NVIDIA
# libraries); TORCH_INDEX=https://download.pytorch.org/whl/cpu gives the
# CPU-only build, TORCH_INDEX=https://download.pytorch.org/whl/cu126 a chosen
# CUDA version.
TORCH_INDEX ?=
TORCH_PIP_ARGS := $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX),)

.PHONY: install install-docs test test-oldest lint docs run clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet $(TORCH_PIP_ARGS) torch==2.13.0
	$(PIP) install --quiet -e ".[test,scores]"
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(PIP) install --quiet -e ".[test,scores,docs]"
	touch $@

install: $(VENV)/.installed

install-docs: $(VENV)/.installed-docs

test: install
	$(PY) -m pytest tests sklearn_measattn

# The tests again, with every runtime dependency at its declared floor
# (.ci/oldest_versions.py derives the pins from pyproject.toml and checks them).
OLDEST_VENV ?= .venv-oldest
OLDEST_PY := $(OLDEST_VENV)/bin/python
test-oldest:
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_PY) -m pip install --quiet --upgrade pip
	$(OLDEST_PY) -m pip install --quiet $(TORCH_PIP_ARGS) torch==2.13.0
	$(OLDEST_PY) .ci/oldest_versions.py > $(OLDEST_VENV)/constraints.txt
	$(OLDEST_PY) -m pip install --quiet -c $(OLDEST_VENV)/constraints.txt -e ".[test]"
	$(OLDEST_PY) .ci/oldest_versions.py --verify
	$(OLDEST_PY) -m pytest -q tests sklearn_measattn

lint: install
	$(PY) -m ruff check .

docs: install-docs
	$(MAKE) -C docs html PYTHON=$(abspath $(PY))

run: install
	$(PY) -m sklearn_measattn compare

clean:
	rm -rf $(VENV) $(OLDEST_VENV) build *.egg-info .pytest_cache docs/_build docs/auto_examples docs/generated
