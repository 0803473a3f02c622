# Everything a newcomer needs, from a machine with only Python 3 and pip.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: install install-docs test docs run clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# The CPU build of torch 2.13.0; a plain `torch` requirement would pull a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e ".[test]"
	touch $@

$(VENV)/.installed-docs: $(VENV)/.installed
	$(PIP) install --quiet -e ".[test,docs]"
	touch $@

install: $(VENV)/.installed

install-docs: $(VENV)/.installed-docs

test: install
	$(PY) -m pytest tests sklearn_measattn

docs: install-docs
	$(MAKE) -C docs html PYTHON=$(abspath $(PY))

run: install
	$(PY) -m sklearn_measattn compare

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache docs/_build docs/auto_examples docs/generated
