"""kafka-local itself: the cluster the group runs on is what the issue promises."""
from __future__ import annotations

from kafka_local.load import create_topic, fill
from real_kafka_checks import placement


def test_six_brokers_three_racks_two_log_dirs_each(local_kafka, real_bootstrap) -> None:
    from kafka.admin import KafkaAdminClient
    admin = KafkaAdminClient(bootstrap_servers=real_bootstrap)
    try:
        brokers = admin.describe_cluster()["brokers"]
    finally:
        admin.close()
    assert sorted(b["broker_id"] for b in brokers) == [1, 2, 3, 4, 5, 6]
    assert {b["broker_id"]: b["rack"] for b in brokers} == {
        1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
    assert all(len(spec.log_dirs) == 2 for spec in local_kafka.brokers.values())
    assert all(row["running"] for row in local_kafka.status())


def test_topic_is_created_where_asked_and_filled(real_bootstrap, topic_name) -> None:
    name = topic_name("local")
    create_topic(real_bootstrap, name, {0: [1, 2, 3], 1: [4, 5, 6]})
    assert placement(real_bootstrap, name) == {0: [1, 2, 3], 1: [4, 5, 6]}
    assert fill(real_bootstrap, name, {0: 1_000_000, 1: 500_000}) == 1_500_000
