# cstrie - developer entry points.  The README's two set-up commands are
# `make demo` (the main job) and `make test` (the test suite; .ci/run calls it).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
NATIVE := $(wildcard native/*.c native/*.h)

.PHONY: demo test test-python test-native lint clean

$(VENV)/.installed: pyproject.toml setup.py cstrie/_build.py $(NATIVE)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/cstrie demo

test: $(VENV)/.installed lint
	$(PY) -m pytest -n auto -q -p no:cacheprovider

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check cstrie tests stress
	$(VENV)/bin/mypy cstrie
	$(MAKE) -s -C native check

clean:
	rm -rf $(VENV) build *.egg-info cstrie/_native.* stress/bin
