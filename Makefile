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
# The newest-release lane (docs/checked-where.md): .venv-latest holds the NEWEST release of every runtime and
# framework dependency, unbounded by pyproject.toml (neurondesk itself installed with --no-deps), on torch 2.13
# CPU and no torch-xla; `make test-latest` runs the tests marked `latest` (and `latest_only`) there. A release
# that breaks us turns that lane red before a user sees it; then fix it, or lower the bound in pyproject.toml.
LATEST := .venv-latest
LATEST_STAMP := $(LATEST)/.installed
LATEST_PACKAGES := textual textual-plotext msgspec prometheus_client zstandard psutil platformdirs nvidia-ml-py \
	'transformers>=5,<6' accelerate lightning trl peft pytest pytest-xdist hypothesis

$(STAMP): pyproject.toml constraints/test.txt
	test -x $(VENV)/bin/python || $(PY) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	# constraints/test.txt: every package of the tested environment at the version CI last passed with
	$(VENV)/bin/pip install -q -c constraints/test.txt -e '.[test,workload]'
	touch $(STAMP)

$(TORCH213_STAMP): constraints/torch213.txt
	test -x $(TORCH213)/bin/python || $(PY) -m venv $(TORCH213)
	$(TORCH213)/bin/pip install -q --upgrade pip
	$(TORCH213)/bin/pip install -q -c constraints/torch213.txt torch==2.13.0
	touch $(TORCH213_STAMP)

# no stamp prerequisite: the newest releases are taken when it is built (CI: every run); here, to take newer
# ones: rm -r .venv-latest && make venv-latest
$(LATEST_STAMP):
	test -x $(LATEST)/bin/python || $(PY) -m venv $(LATEST)
	$(LATEST)/bin/pip install -q --upgrade pip
	$(LATEST)/bin/pip install -q --upgrade --upgrade-strategy eager torch==2.13.0 $(LATEST_PACKAGES)
	$(LATEST)/bin/pip install -q --no-deps -e .
	touch $(LATEST_STAMP)

.PHONY: venv venv-torch213 venv-latest demo test test-fast test-latest screenshots
venv: $(STAMP)
venv-torch213: $(TORCH213_STAMP)
venv-latest: $(LATEST_STAMP)

demo: $(STAMP)
	$(VENV)/bin/neurondesk demo

test: $(STAMP) $(TORCH213_STAMP)
	$(VENV)/bin/ruff check neurondesk workloads tests benchmarks scripts
	$(VENV)/bin/lint-imports --no-cache --no-logo  # docs/design.md's arrows: [tool.importlinter] in pyproject.toml
	# two workers, one test file each (module fixtures are whole real runs), tests/runs and tests/system first
	# (conftest's RUN_ORDER); latest_only tests need a package only .venv-latest has (trl, peft): `make test-latest`.
	# Timing: README's Quick start and docs/testing.md. The 30 slowest are listed.
	$(VENV)/bin/python -m pytest -q -n 2 --dist loadfile --durations=30 -m "not latest_only"

# the tests marked `latest` (and `latest_only`) under the newest releases; no torch-xla in this venv
test-latest: $(LATEST_STAMP) $(TORCH213_STAMP)
	$(LATEST)/bin/python -m pytest -q -n 2 --dist loadfile -m "latest or latest_only"

# The lane to run while changing code (tests/conftest.py's FAST_LANES, scripts/sort_tests.py files the modules):
# pure reducers, parsers, core figures, views on recorded journals, contracts; no real process of a workload
# (the conftest guard fails a test there that starts one), no `slow` hypothesis sweep (`make test` runs those).
# 897 tests: 81 s here with other sessions holding ~2 cores, 85 CPU-s in all (2026-12-07; docs/testing.md).
test-fast: $(STAMP)
	$(VENV)/bin/ruff check neurondesk workloads tests benchmarks scripts
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(VENV)/bin/python -m pytest -q -n 2 --dist worksteal -m "not slow" tests/unit tests/views tests/contracts

screenshots: $(STAMP)
	$(VENV)/bin/python scripts/make_screenshots.py
