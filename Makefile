# rpquery — `make help` lists every target.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB ?= sqlite:///rpquery.db
PYTEST_ARGS ?=
BIND ?= 127.0.0.1:8778
WORKERS ?= 2
BENCH_SCALE ?= medium
BENCH_BACKENDS ?= sqlite,postgresql,mysql
BENCH_CLUSTER ?= 1
SEEDS ?= 1-20
BACKENDS ?= sqlite,postgresql,mysql
DIFF_REQUESTS ?= 250
SOAK_SECONDS ?= 600
SOAK_FUZZ_EXAMPLES ?= 60
# The write-path and concurrency suites that CI runs on the galera backend (make test-galera-writes);
# the killed-connections reliability run (40 s there) is left to make test-galera;
# so is the stalled-node run (a node that rejoined once refused the trigger's body: docs/deployment.md)
GALERA_SUITES ?= tests/test_galera_backend.py tests/test_write_allocations.py tests/test_write_associations.py tests/test_write_catalog.py tests/test_write_inventory.py tests/test_write_providers.py tests/test_write_concurrency.py tests/test_tags_concurrency.py tests/reliability/test_contention.py::test_sixteen_writers_leave_every_invariant tests/reliability/test_contention.py::test_racing_schedulers_keep_the_group_policies
# make soak BACKENDS=...: the soak's own default is the two servers
SOAK_BACKENDS := $(if $(filter command line environment,$(origin BACKENDS)),$(BACKENDS),postgresql,mysql)

.PHONY: help install run serve test test-fast test-clusters test-galera test-galera-writes lint type bench bench-cluster bench-startup bench-shapes bench-placement soak soak-http placement-venv osc-venv diff-placement galera-up galera-down galera-status replica-up replica-down clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}'

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

install: $(STAMP) ## Create .venv and install rpquery with its test extras (pinned by constraints.txt)

run: $(STAMP) ## The main job: create rpquery.db (SQLite), load a sample cloud, print a guided tour
	$(BIN)/rpquery --db $(DB) tour

serve: $(STAMP) ## Placement's REST API on BIND (127.0.0.1:8778) over DB with WORKERS processes (rpquery serve)
	$(BIN)/rpquery --db $(DB) db upgrade
	$(BIN)/rpquery --db $(DB) serve --bind $(BIND) --workers $(WORKERS)

test: $(STAMP) ## Run the whole suite on SQLite, PostgreSQL and MariaDB (CI=true fails on a missing backend)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: $(STAMP) ## Run the suite on SQLite only
	RPQUERY_TEST_BACKENDS=sqlite $(BIN)/python -m pytest -x -q $(PYTEST_ARGS)

test-clusters: $(STAMP) ## Only the Galera and hot-standby tests (they start and stop their own clusters; root)
	RPQUERY_TEST_GALERA=1 RPQUERY_TEST_REPLICA=1 $(BIN)/python -m pytest -q -m 'galera or replica' $(PYTEST_ARGS)

test-galera: $(STAMP) ## The whole suite on the galera backend: a 3-node cluster, each connection to the next node (root)
	RPQUERY_TEST_BACKENDS=galera $(BIN)/python -m pytest -q $(PYTEST_ARGS)

test-galera-writes: $(STAMP) ## Only the write-path and concurrency suites (GALERA_SUITES) on the galera backend, as CI runs them
	RPQUERY_TEST_BACKENDS=galera $(BIN)/python -m pytest -q $(GALERA_SUITES) $(PYTEST_ARGS)

galera-up: ## Start a 3-node MariaDB Galera cluster on 127.0.0.1:4406-4408 (scripts/galera.sh; root)
	bash scripts/galera.sh up

galera-down: ## Stop the Galera cluster and delete its data (GALERA_KEEP=1: keep it, with the nodes' logs)
	bash scripts/galera.sh down

galera-status: ## State of each Galera node
	bash scripts/galera.sh status

replica-up: ## Start a PostgreSQL primary (127.0.0.1:5442) and hot standby (5443) (scripts/pg-replica.sh; root)
	bash scripts/pg-replica.sh up

replica-down: ## Stop the PostgreSQL primary and standby and delete their data
	bash scripts/pg-replica.sh down

lint: $(STAMP) ## ruff over the package, tests and benchmarks
	$(BIN)/ruff check rpquery schema tests benchmarks

type: $(STAMP) ## mypy on the package
	$(BIN)/mypy

bench: $(STAMP) ## Benchmarks at BENCH_SCALE (tiny|small|medium|large) on BENCH_BACKENDS, as root with the cluster scenarios (BENCH_CLUSTER=0: without); writes benchmarks/results/<ts>/
	BENCH_SCALE=$(BENCH_SCALE) BENCH_BACKENDS=$(BENCH_BACKENDS) BENCH_CLUSTER=$(BENCH_CLUSTER) $(BIN)/python -m benchmarks.run

bench-cluster: $(STAMP) ## Claims/s on a 3-node Galera cluster (1/8/16 writers, one node vs three) and candidates on a hot standby vs primary (root)
	$(BIN)/python -m benchmarks.cluster

bench-startup: $(STAMP) ## Start-up: rpquery --help and one-off queries on a small SQLite cloud, each a fresh process (median of 21; wall and CPU)
	$(BIN)/python -m benchmarks.startup

bench-shapes: $(STAMP) ## Never-seen requests: random candidates request shapes on a 100-host cloud per BENCH_BACKENDS, first ask and repeat (median, p90)
	$(BIN)/python -m benchmarks.shapes --backends $(BENCH_BACKENDS)

bench-placement: $(STAMP) ## Side-by-side against OpenStack Placement: reads and claims/s (installs it into .venv-placement)
	BENCH_SCALE=$(BENCH_SCALE) BENCH_BACKENDS=$(BENCH_BACKENDS) $(BIN)/python -m benchmarks.run --placement

osc-venv: ## Install osc-placement (pinned) into .venv-osc for the real-client test (tests/test_osc_placement.py)
	test -x .venv-osc/bin/python || $(PYTHON) -m venv .venv-osc
	.venv-osc/bin/python -m pip install -q -c tests/osc-constraints.txt osc-placement python-openstackclient

soak: $(STAMP) ## Reliability soak on BACKENDS (postgresql,mysql): 16 writers + 8 schedulers with connections killed for SOAK_SECONDS (600) each, then a long input fuzz; invariants checked
	$(BIN)/python -m tests.reliability.soak --seconds $(SOAK_SECONDS) --backends $(SOAK_BACKENDS)
	RPQUERY_FUZZ_EXAMPLES=$(SOAK_FUZZ_EXAMPLES) RPQUERY_TEST_BACKENDS=$(SOAK_BACKENDS) \
		$(BIN)/python -m pytest -q tests/reliability/test_fuzz.py

soak-http: $(STAMP) ## rpquery serve (4 gevent workers) on BACKENDS (all three) for SOAK_SECONDS (600) each: 8 HTTP claimers, 32 slow clients, a worker SIGKILLed every 5 s; then the invariants and rpquery db check
	$(BIN)/python -m tests.reliability.soak_http --seconds $(SOAK_SECONDS) --backends $(BACKENDS)

placement-venv: $(STAMP) ## Install OpenStack Placement (pinned) into .venv-placement for the compatibility tests
	$(BIN)/python -m benchmarks.side_by_side

diff-placement: $(STAMP) ## Differential test vs OpenStack Placement on random clouds: SEEDS=1-200 BACKENDS=sqlite,mysql
	$(BIN)/python -m benchmarks.side_by_side
	$(BIN)/python -m tests.differential.run --seeds $(SEEDS) --backends $(BACKENDS) --requests $(DIFF_REQUESTS)

clean: ## Remove the virtualenv, caches and the embedded database
	rm -rf $(VENV) .venv-placement .venv-osc .pytest_cache .mypy_cache .ruff_cache .hypothesis rpquery.db rpquery.db-*
