#!/usr/bin/env bash
# Fetches Apache Kafka's own jars (kafka/pom.xml: broker, KRaft controller, tools, 4.3.1) with
# their dependencies from Maven Central into kafka/lib/, for kafka-local and Kafka's own tools.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
  echo "setup error: Java 17 or newer is needed to run Apache Kafka (no java on PATH, no JAVA_HOME)" >&2
  exit 1
fi
if ! command -v mvn >/dev/null 2>&1; then
  echo "setup error: Maven (mvn) is needed to fetch Apache Kafka's jars from Maven Central (apt-get install maven)" >&2
  exit 1
fi
rm -rf kafka/lib.partial
mvn -q -B -f kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=lib.partial
rm -rf kafka/lib
mv kafka/lib.partial kafka/lib
touch kafka/lib/.complete
echo "Apache Kafka jars: $(ls kafka/lib/*.jar | wc -l) in kafka/lib"
