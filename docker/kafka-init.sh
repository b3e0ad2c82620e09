#!/usr/bin/env bash
# One-shot job of the compose stack: creates demo topics whose replicas all sit on
# brokers 1-3 (broker 4 joins empty, as a newly added broker does) and writes some data,
# so the kafka_rebalance DAG has real work to plan. Idempotent: existing topics are kept.
set -euo pipefail

bootstrap="${KAFKA_BOOTSTRAP:?must be set}"
records="${DEMO_RECORDS_PER_TOPIC:-20000}"
record_size="${DEMO_RECORD_SIZE:-1024}"
bin=/opt/kafka/bin

fill() {  # fill NAME: write DEMO_RECORDS_PER_TOPIC records so moves copy real bytes
  "$bin/kafka-producer-perf-test.sh" --topic "$1" --num-records "$records" \
    --record-size "$record_size" --throughput -1 \
    --producer-props bootstrap.servers="$bootstrap" acks=all >/dev/null
  echo "kafka-init: wrote $records x $record_size B to $1"
}

exists() {
  "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --list | grep -qx "$1"
}

create() {  # create NAME ASSIGNMENT [CONFIG...], then fill it
  local name=$1 assignment=$2; shift 2
  if exists "$name"; then
    echo "kafka-init: topic $name exists, kept as is"
    return 0
  fi
  local args=()
  for c in "$@"; do args+=(--config "$c"); done
  "$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --create --topic "$name" \
    --replica-assignment "$assignment" "${args[@]}"
  fill "$name"
}


# Replica lists are rack-spread over racks a,b,c (brokers 1,2,3); broker 4 (rack a) is empty.
create orders "1:2:3,2:3:1,3:1:2,1:2:3,2:3:1,3:1:2" min.insync.replicas=2
create payments "1:2:3,1:3:2,1:2:3,1:3:2" min.insync.replicas=2
create clickstream "2:3,3:2,2:3,3:2,2:3,3:2,2:3,3:2" min.insync.replicas=1

"$bin/kafka-topics.sh" --bootstrap-server "$bootstrap" --describe --exclude-internal
