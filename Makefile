# The two commands the README starts with: `make demo` (main job) and `make test` (test suite).
# Both create .venv if missing and install the project with its dev extra from pyproject.toml.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-fast test-pools claims bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

# The main job: a small compute-matched GRPO-vs-PPO comparison (5 seeds each, BugFix), its
# report (runs/compare/.../report.md + PNGs, printed) and offline wandb runs.
demo: $(STAMP)
	$(PY) -m experiments.compare

# Everything, end-to-end (`slow`) tests included: what CI runs, on TEST_WORKERS processes
# (pytest-xdist; work stealing evens out the long end-to-end tests; `TEST_WORKERS=0` = one process).
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# The inner loop: everything except the end-to-end runs marked `slow`.
test-fast: $(STAMP)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not slow"

# the full 10 000 / 1 000-task pools of every BugFix difficulty (functional disjointness; slow)
test-pools: $(STAMP)
	AGENTRL_POOL_TESTS=1 $(PY) -m pytest -m pools

claims: $(STAMP)
	$(PY) -m experiments.reproduce_claims

bench: $(STAMP)
	$(PY) -m benchmarks envs

clean:
	rm -rf $(VENV) outputs multirun runs .pytest_cache .hypothesis
