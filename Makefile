# logbus: one entry point for a fresh machine. Every target installs what it needs first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON      ?= $(shell command -v python3.11 || command -v python3)
VENV        := .venv
VPY         := $(VENV)/bin/python
CONSTRAINTS := constraints/known-good.txt
STAMP       := $(VENV)/.logbus-installed
# Debian's ZooKeeper server and the jars our launcher puts on the classpath (broker/cluster/embedded_zk.py).
ZK_JARS     := /usr/share/java/zookeeper.jar /usr/share/java/slf4j-simple.jar
# The loader's metrics tests push to a real pushgateway (tests/pipelines/test_metrics_push.py);
# kcat is a third-party client of the security tests (tests/security/test_third_party_clients.py);
# chromium and chromium-driver run the console's browser tests (tests/console/test_console_browser.py).
PUSHGATEWAY := /usr/bin/prometheus-pushgateway
SUDO        := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_ENV     := DEBIAN_FRONTEND=noninteractive

.PHONY: help setup system-deps python-deps lint test test-fast run bench clean

help:
	@echo "make setup   venv + pip install -e .[pipelines,mirror,airflow,console,test] + apt zookeeper/JRE/pushgateway/kcat/chromium (idempotent)"
	@echo "make run     the main job: ZooKeeper + 3 brokers, produce, Airflow DAG load + validate, rerun, summary"
	@echo "make test    ruff + mypy, then the whole test suite (fast set and integration set)"
	@echo "make test-fast  ruff + mypy, then the fast set only (unit and property tests, no processes)"
	@echo "make lint    ruff (lint + import order) and mypy (broker/protocol, storage, server, cluster)"
	@echo "make bench   produce/consume benchmark"

setup: system-deps python-deps

# apt-get only when something is missing, so a second run costs nothing. The tests start their
# own pushgateway: the service the Debian package enables is stopped again when we installed it.
system-deps:
	@missing=0; \
	for jar in $(ZK_JARS); do [ -f "$$jar" ] || missing=1; done; \
	command -v java >/dev/null 2>&1 || missing=1; \
	command -v kcat >/dev/null 2>&1 || missing=1; \
	command -v chromium >/dev/null 2>&1 || missing=1; \
	command -v chromedriver >/dev/null 2>&1 || missing=1; \
	had_pushgateway=0; [ -x $(PUSHGATEWAY) ] && had_pushgateway=1 || missing=1; \
	if [ $$missing = 1 ]; then \
	  echo "installing Debian's zookeeper, a headless JRE, the Prometheus pushgateway, kcat, chromium and chromium-driver"; \
	  $(SUDO) $(APT_ENV) apt-get update -q && \
	  $(SUDO) $(APT_ENV) apt-get install -y -q --no-install-recommends zookeeper default-jre-headless prometheus-pushgateway kcat chromium chromium-driver; \
	  if [ $$had_pushgateway = 0 ] && command -v systemctl >/dev/null 2>&1; then \
	    $(SUDO) systemctl disable --now prometheus-pushgateway >/dev/null 2>&1 || true; \
	  fi; \
	fi

python-deps: $(STAMP)

$(VPY):
	$(PYTHON) -m venv $(VENV)

# Re-run pip only when the dependency list, the pins or a compiled module's source change
# (pip builds setup.py's Cython modules in place; with no C compiler the pure-Python paths run).
$(STAMP): pyproject.toml setup.py $(CONSTRAINTS) $(wildcard broker/*/*.pyx broker/*/*/*.pyx broker/*/*.pxd) | $(VPY)
	$(VPY) -m pip install -q -c $(CONSTRAINTS) -e '.[pipelines,mirror,airflow,console,test]'
	touch $@

# Lint first: a style or type error fails CI before the tests start.
lint: setup
	$(VENV)/bin/ruff check --no-cache .
	$(VENV)/bin/mypy --no-incremental

# The suite mostly waits (processes starting, failovers, sessions expiring): two workers, each
# running a whole test file at a time (module fixtures such as a module's broker stay per file),
# the slowest files first (tests/ordering.py; xdist's own reorder would put them last).
PYTEST_WORKERS ?= 2

test: lint
	$(VENV)/bin/pytest -q -p no:cacheprovider -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The unit and property tests: no ZooKeeper, no broker process, no Spark (tests/conftest.py marks the rest).
test-fast: lint
	$(VENV)/bin/pytest -q -p no:cacheprovider -m "not integration"

# The main job: ZooKeeper + 3 brokers, an activity stream, the warehouse_load DAG through
# `airflow dags test`, a summary checked against what was produced, a rerun; all stopped after.
run: setup
	$(VPY) -m pipelines.main_job

bench: setup
	$(VPY) bench/produce_consume.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +
