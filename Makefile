# controlplane: `make run` starts the server, `make test` runs the tests.
# Everything beyond Python 3.11 and make is installed by these targets.

.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
# Written after a successful install; older than pyproject.toml means "reinstall".
STAMP  := $(VENV)/.installed
# apt-get needs root; use sudo only when we are not root already.
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT    := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get
ARGS   ?=
# Test processes (pytest-xdist, a test file each at a time). Most of a test's time is spent
# waiting on a served API server, so three processes fit two cores; 0 runs them in this one.
TEST_WORKERS ?= 3

.PHONY: help venv bytecode etcd wrk run test bench lint clean distclean

help:
	@echo "make run        start the API server (writes .controlplane/kubeconfig)"
	@echo "make test       run the tests (ARGS='-k foo' to pass pytest options, TEST_WORKERS=0 for one process)"
	@echo "make bench      run the benchmarks"
	@echo "make lint       ruff and mypy"
	@echo "make venv       create .venv and install the project with its test and load extras"
	@echo "make bytecode   compile the project's modules to __pycache__/ (run, test and bench do it first)"
	@echo "make etcd       install etcd (Debian's etcd-server) if it is not on PATH"
	@echo "make clean      remove caches, build output and .controlplane/ (the server's state)"
	@echo "make distclean  clean, and remove .venv"

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: need python3.11 (or python3 >= 3.11) on PATH" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "make: $(PYTHON) is Python $$($(PYTHON) -c 'import platform; print(platform.python_version())'); need 3.11 or newer (PYTHON=/path/to/python3.11)" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check -q -e '.[test,load]'
	touch $@

wrk:
	@if command -v wrk >/dev/null 2>&1; then \
		echo "wrk: $$(command -v wrk)"; \
	else \
		set -x; $(APT) update -q && $(APT) install -y -q wrk; \
	fi

etcd:
	@if command -v etcd >/dev/null 2>&1; then \
		echo "etcd: $$(command -v etcd)"; \
	else \
		set -x; $(APT) update -q && $(APT) install -y -q etcd-server; \
	fi

# The project's own modules compiled once to __pycache__/. pip compiles what it installs, but
# not an editable install's sources, and where PYTHONDONTWRITEBYTECODE is set (as on these
# machines) every process would compile them again: about 0.9 s of a server's 2.3 s start, and
# the tests start hundreds of servers, workers and CLIs. compileall writes whatever that
# variable says and skips a module whose source has not changed.
bytecode: venv
	@$(BIN)/python -m compileall -q -j 0 controlplane store loadtest tests

run: venv bytecode
	$(BIN)/controlplane serve $(ARGS)

test: venv etcd bytecode
	$(BIN)/python -m pytest -q -ra -n $(TEST_WORKERS) --dist loadfile $(ARGS)

bench: venv etcd wrk bytecode
	$(BIN)/controlplane bench store
	$(BIN)/controlplane bench api
	$(BIN)/controlplane bench writes
	$(BIN)/controlplane bench watchcache
	$(BIN)/controlplane bench scheduler
	$(BIN)/controlplane bench nodes
	$(BIN)/controlplane bench dra
	$(BIN)/controlplane bench dra --api
	$(BIN)/controlplane bench autoscaler
	$(BIN)/controlplane bench informer
	$(BIN)/controlplane bench lease-watch
	$(BIN)/controlplane bench idle

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy

clean:
	rm -rf .controlplane build dist .pytest_cache .mypy_cache .ruff_cache *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
