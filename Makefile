# cstrie - developer entry points.  The README's two set-up commands are
# `make demo` (the main job) and `make test` (the test suite; .ci/run calls it).
# Both install the library and, beside it, the benchmark lab (stress/lab: the
# baselines, `cstrie bench` and `cstrie demo`).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
NATIVE := $(wildcard native/*.c native/*.h native/*.mk native/hotpath/*.c native/hotpath/*.h)
LAB := stress/lab

.PHONY: demo test test-ft lint clean redis-server

$(VENV)/.installed: pyproject.toml $(LAB)/pyproject.toml setup.py cstrie/_build.py $(NATIVE)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark,kombu,amqtt]' -e $(LAB)
	touch $@

$(VENV)/.core: pyproject.toml $(LAB)/pyproject.toml setup.py cstrie/_build.py $(NATIVE)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e . -e $(LAB)
	touch $@

demo: $(VENV)/.core
	$(VENV)/bin/cstrie demo

# The suite on this interpreter (rule, fuzz, model, thread, export, Spark and
# native sanitizer tests), then again on a free-threaded CPython 3.13 with the
# GIL off, plus the stress harness's linearizability run (.ci/ft-test).
test: $(VENV)/.installed lint redis-server
	$(PY) -m pytest -n auto -q -p no:cacheprovider
	$(MAKE) test-ft

# The kombu Redis transport's tests start a redis-server of their own: Debian's
# package, installed by .ci/redis-server with apt-get when it is missing (root or
# password-less sudo).  Where it cannot be installed those tests skip, saying so.
redis-server:
	@.ci/redis-server >/dev/null || echo "make: no redis-server: the kombu Redis tests will skip" >&2

test-ft:
	FT_TEST_PYTEST_ARGS="--ignore=tests/spark --ignore=tests/native/test_native.py --ignore=tests/lab/bench --ignore=stress/lab/benchmarks" \
		.ci/ft-test

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check cstrie tests stress
	$(VENV)/bin/mypy cstrie $(LAB)/cstrie_lab
	$(MAKE) -s -C native check PYTHON=$(abspath $(PY))

clean:
	rm -rf $(VENV) .venv-ft build *.egg-info $(LAB)/build $(LAB)/*.egg-info cstrie/_native.* stress/bin
