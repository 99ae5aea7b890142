# envlab: two commands for a fresh machine: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
export HF_HUB_OFFLINE ?= 1
export HF_HUB_DISABLE_TELEMETRY ?= 1
export OPENREWARD_DISABLE_UPDATE_CHECK ?= 1

.PHONY: run test bench install lint check migrate demo-model clean

$(PY):
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is needed ($(PYTHON) not found)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

# CPU torch first where there is no CUDA: any looser spec pulls a multi-GB CUDA build.
$(STAMP): pyproject.toml constraints.txt client/pyproject.toml | $(PY)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -c constraints.txt -e ".[dev]"
	# envlab-client (client/): the suite drives a live lab with its `envlab` command.
	$(PIP) install -q -c constraints.txt -e "./client[parquet]"
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(PY) manage.py migrate --noinput -v 0

demo-model: install
	$(PY) manage.py build_demo_model echo --if-missing

run: migrate demo-model
	@scripts/ensure_redis.sh
	$(PY) scripts/run_all.py

test: install
	@scripts/ensure_test_deps.sh
	$(PY) scripts/run_tests.py

bench: install
	@scripts/ensure_redis.sh
	$(PY) -m bench

# Every fault test (pytest marker `chaos`) on a real stack, then RELIABILITY.md's table.
.PHONY: chaos
chaos: install
	@scripts/ensure_test_deps.sh
	$(PY) scripts/chaos.py

# The guide's table (base / SFT / SFT+GRPO on Catch) through the API and a real worker, in a
# scratch installation under var/learning-table/; options in ARGS, e.g. ARGS="--seeds 0 --quick".
.PHONY: learning-table
learning-table: install
	@scripts/ensure_redis.sh
	$(PY) -m bench.learning_table $(ARGS)

# The Harbor server's own environment (Python 3.12: openenv's Harbor extra needs it), .venv-harbor;
# serve with .venv-harbor/bin/openenv harbor serve --dataset ... (README, "Harbor servers").
.PHONY: harbor-env
harbor-env:
	scripts/harbor_env.sh

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy
	$(PY) manage.py makemigrations --check --dry-run

clean:
	rm -rf var/runs var/log

# Issue 23's load test: N training runs (own workers, bundled echo server) watched by WebSocket
# clients and polled by API readers, against the same runs alone; loopback only, minutes long.
# ARGS="--runs 5 --clients 100 --readers 20 --seconds 300" are the defaults; ARGS="--quick" is small.
.PHONY: loadtest
loadtest: install demo-model
	@scripts/ensure_redis.sh
	$(PY) -m bench.loadtest $(ARGS)
