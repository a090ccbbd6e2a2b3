# Two set-up-and-go targets: `make demo` (the console on the bundled workload) and `make test`.
# Both create .venv at the repo root on first use: neurondesk itself (console deps only) plus
# torch 2.9.0 + torch-xla 2.9.0 for the bundled workload, which runs in that same venv's python.
PY ?= python3.11
VENV := .venv
STAMP := $(VENV)/.installed
# torch 2.13, the torch TorchNeuron (torch-neuronx 2.13) runs on: the TorchNeuron tests run their workloads
# in it (a CPU build from PyPI; tests/torch213.py finds it, or NEURONDESK_TORCH213_PYTHON names another)
TORCH213 := .venv-torch213
TORCH213_STAMP := $(TORCH213)/.installed

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test,workload]'
	touch $(STAMP)

$(TORCH213_STAMP):
	test -x $(TORCH213)/bin/python || $(PY) -m venv $(TORCH213)
	$(TORCH213)/bin/pip install -q --upgrade pip
	$(TORCH213)/bin/pip install -q torch==2.13.0
	touch $(TORCH213_STAMP)

.PHONY: venv venv-torch213 demo test test-fast screenshots
venv: $(STAMP)
venv-torch213: $(TORCH213_STAMP)

demo: $(STAMP)
	$(VENV)/bin/neurondesk demo

test: $(STAMP) $(TORCH213_STAMP)
	$(VENV)/bin/ruff check neurondesk workloads tests benchmarks scripts
	$(VENV)/bin/lint-imports --no-cache --no-logo  # DESIGN.md's arrows: [tool.importlinter] in pyproject.toml
	# two workers, one test file each (module fixtures are whole real runs), tests/runs and tests/system first (conftest's
	# RUN_ORDER): 17.9-19.1 min here (2026-12-06, fresh clones); not re-measured whole since the lanes (2026-12-07: seven
	# sessions on these 2 cores, load 6-17). Per file, real processes: docs/testing.md. The 30 slowest are listed.
	$(VENV)/bin/python -m pytest -q -n 2 --dist loadfile --durations=30

# The lane to run while changing code (tests/conftest.py's FAST_LANES, scripts/sort_tests.py files the modules):
# pure reducers, parsers, core figures, views on recorded journals, contracts; no real process of a workload
# (the conftest guard fails a test there that starts one), no `slow` hypothesis sweep (`make test` runs those).
# 897 tests: 81 s here with other sessions holding ~2 cores, 85 CPU-s in all (2026-12-07; docs/testing.md).
test-fast: $(STAMP)
	$(VENV)/bin/ruff check neurondesk workloads tests benchmarks scripts
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(VENV)/bin/python -m pytest -q -n 2 -m "not slow" tests/unit tests/views tests/contracts

screenshots: $(STAMP)
	$(VENV)/bin/python scripts/make_screenshots.py
