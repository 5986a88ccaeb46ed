# Two commands: `make run` (the whole stack on 127.0.0.1:8000) and `make test` (the whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test test-fast test-stress lint deps bench

# One person on their own machine: the control host may be a node (REMOTEGPU_LOCAL_NODE=0 turns it off).
run: deps
	REMOTEGPU_LOCAL_NODE=$${REMOTEGPU_LOCAL_NODE:-1} $(PY) manage.py runstack

test: deps
	VENV=$(VENV) ./bin/test

# Everything but the end-to-end and migration tests (no worker, box, browser, stack or migration round
# trip), on tables made from the models (--nomigrations): the quick loop while working. Three workers:
# with nothing to wait on, a fourth only adds its start-up (59.8 s against 62.4 s). `make test`
# (and CI) runs every test on a database built by the migrations.
test-fast: deps
	VENV=$(VENV) TEST_WORKERS=$${TEST_WORKERS:-3} ./bin/test -m "not e2e and not migration" --nomigrations

# The end-to-end tier three times in random orders on a machine loaded by a CPU burner per core: a
# failure is a flake to fix at its cause (bin/test-stress prints each pass's seed to replay it).
test-stress: deps
	VENV=$(VENV) ./bin/test-stress

# Every benchmark, each figure printed beside its baseline from the same run (see docs/benchmarks.md).
bench: deps
	$(PY) bench/all.py

lint: deps
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

deps: $(VENV)/.installed

$(VENV)/.installed: requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "RemoteGPU needs Python 3.11 (set PYTHON=python3.11)")'
	./bin/venv $(PYTHON) $(VENV)
