# Set-up, demo, tests and benchmarks. Every target creates .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Apache Kafka 4.3.1's jars from Maven Central (kafka/pom.xml), for the local real cluster.
KAFKA_JARS := kafka/lib/.complete

.PHONY: setup class-archive system-deps demo demo-kafka test test-fast test-kafka bench sizes clean

setup: $(STAMP) system-deps $(KAFKA_JARS) class-archive

$(KAFKA_JARS): kafka/pom.xml
	@bash scripts/kafka-jars.sh

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.txt -r requirements-dev.txt
	# The Spark provider pulls in pyspark-client, whose Python files overwrite pyspark's own;
	# put back the ones that match pyspark's JVM jars (else Python UDFs fail to construct).
	$(BIN)/pip install -q --no-deps --force-reinstall "$$(grep -E '^pyspark==' requirements.txt)"
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

# The Spark driver's class-data archive (planning/spark/class_archive.py): Spark starts about
# 4 s sooner with it. Written once per Java and PySpark, in ~/.cache/kafka-reassign.
class-archive: $(STAMP)
	$(BIN)/python -m kafka_reassign.planning.spark.class_archive --if-missing

# Command-line tools the tests drive: kcat (a third Kafka client), docker-compose
# (validates the compose file without an engine), chromium (UI screenshot test).
system-deps:
	@bash scripts/system-deps.sh

demo: setup
	$(BIN)/python -m kafka_reassign_demo --airflow-home airflow_home

# The same narrated demo on a real local Apache Kafka 4.3.1 cluster (kafka-local).
demo-kafka: setup
	$(BIN)/python -m kafka_reassign_demo --airflow-home airflow_home --real-kafka

# Everything: unit, simulator integration, real Airflow and Spark, real Kafka (tests/kafka).
test: setup
	$(BIN)/python -m pytest

# mypy on the domain package ([tool.mypy] in pyproject.toml), then the unit tests (no Airflow
# run, no Spark, no simulator network): well under a minute.
test-fast: setup
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest tests/unit -q

# Only the tests on the local real Kafka cluster.
test-kafka: setup
	$(BIN)/python -m pytest tests/real_kafka -q

bench: setup
	$(BIN)/python -m benchmarks.run

# Functions over 60 lines and modules over 500 (issue 21's targets); fails when any is over.
sizes:
	$(PYTHON) scripts/code_sizes.py .

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info kafka/lib
