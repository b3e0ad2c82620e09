# Set-up, demo, tests and benchmarks. Every target creates .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup system-deps demo test test-fast bench clean

setup: $(STAMP) system-deps

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt -r requirements-dev.txt
	# The Spark provider pulls in pyspark-client, whose Python files overwrite pyspark's own;
	# put back the ones that match pyspark's JVM jars (else Python UDFs fail to construct).
	$(BIN)/pip install -q --no-deps --force-reinstall "$$(grep -E '^pyspark==' requirements.txt)"
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

# Command-line tools the tests drive: kcat (a third Kafka client), docker-compose
# (validates the compose file without an engine), chromium (UI screenshot test).
system-deps:
	@bash scripts/system-deps.sh

demo: setup
	$(BIN)/python -m kafka_reassign.demo --airflow-home airflow_home

# Everything: unit, simulator integration, real Airflow and Spark (about 15 minutes).
test: setup
	$(BIN)/python -m pytest

# Unit tests only (no Airflow run, no Spark, no simulator network): well under a minute.
test-fast: setup
	$(BIN)/python -m pytest tests/unit -q

bench: setup
	$(BIN)/python -m benchmarks.run

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
