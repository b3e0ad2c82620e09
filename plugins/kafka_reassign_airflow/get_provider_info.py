"""Provider metadata: what ``pip install kafka-reassign`` registers in an Airflow installation.

Airflow reads it through the ``apache_airflow_provider`` entry point (``airflow providers
list``, ``airflow providers hooks``, ``... notifications``, ``... plugins``, ``airflow config
list --defaults``). Nothing here is imported at DAG parse time.
"""
from __future__ import annotations

from typing import Any

PACKAGE_NAME = "kafka-reassign"
VERSION = "0.1.0"
CONN_TYPE = "kafka_reassign"
_INTEGRATION = "Apache Kafka partition reassignment"


def _option(description: str, kind: str, default: Any, example: Any = None) -> dict[str, Any]:
    return {"description": description, "version_added": "0.1.0", "type": kind,
            "example": example, "default": None if default is None else str(default)}


CONFIG_OPTIONS: dict[str, dict[str, Any]] = {
    "admin_retry_attempts": _option("Attempts of a Kafka admin call before the task fails.", "integer", 5),
    "admin_retry_max_seconds": _option("Longest time an admin call is retried (seconds).", "float", 60.0),
    "admin_bootstrap_timeout_ms": _option("How long to try reaching the cluster at all (ms).", "integer", 10000),
    "kafka_client_log_level": _option(
        "Log level of the Kafka client libraries (kafka-python) in task logs. WARNING keeps the "
        "logs to the run's story; INFO or DEBUG show every connection and request.", "string", "WARNING", "INFO"),
    "work_dir": _option("Directory of snapshots, plans, summaries and charts; empty = "
                        "$AIRFLOW_HOME/kafka_reassign.", "string", "", "/data/kafka_reassign"),
    "rebalance_schedule": _option(
        "Schedule of the kafka_rebalance DAG (and of each fleet cluster's kafka_rebalance__<conn_id> "
        "without a schedule of its own); none = only when triggered.", "string", "@daily", "0 3 * * *"),
    "reconciler_schedule": _option("Schedule of the kafka_throttle_reconciler DAG; none = only when triggered.",
                                   "string", "*/15 * * * *", "none"),
    "max_active_runs": _option(
        "Runs of kafka_reassign at once across the fleet; runs on one cluster never overlap (the cluster "
        "lock refuses the second one at prepare).", "integer", 16, "32"),
    "fleet": _option(
        "The clusters the scheduled DAGs cover: a JSON list of {conn_id, schedule, balance_threshold, "
        "throttle_bytes_per_sec, require_approval}; the Variable kafka_reassign_fleet wins when set. "
        "Empty = one cluster, kafka_default.", "string", "",
        '[{"conn_id": "kafka_eu1", "schedule": "0 2 * * *"}, "kafka_us1"]'),
    "planning_pool": _option(
        "Airflow pool of the planning (Spark) tasks: bounds how many planning jobs run at once. "
        "Created with planning_pool_slots slots when the api-server loads the plugin and it is missing; "
        "empty = default_pool.", "string", "kafka_reassign_planning"),
    "planning_pool_slots": _option("Slots of the planning pool when the provider creates it.", "integer", 4),
    "notify_on_failure": _option(
        "Where failed runs are reported: channels separated by ';' - smtp:<addresses>, slack:#<channel>, "
        "slack-webhook, log. <dag_id>_notify_on_failure overrides it for one DAG.", "string", "",
        "smtp:kafka-ops@example.com; slack:#kafka-ops"),
    "notify_on_success": _option("Where finished runs are reported (same format as notify_on_failure).",
                                 "string", "", "slack:#kafka-ops"),
    "notify_smtp_conn_id": _option("SMTP connection of smtp: channels; empty = [email] email_conn_id.",
                                   "string", "", "smtp_default"),
    "notify_slack_conn_id": _option("Slack API connection of slack: channels.", "string", "slack_api_default"),
}


def get_provider_info() -> dict[str, Any]:
    """The provider's registration, in Airflow's ``provider_info.schema.json`` format."""
    return {
        "package-name": PACKAGE_NAME,
        "name": "Kafka Reassign",
        "description": "Safe Apache Kafka partition reassignment: KIP-435 moves under a KIP-73 "
                       "throttle, planned on Spark, with live progress in the Airflow UI.",
        "versions": [VERSION],
        "integrations": [{"integration-name": _INTEGRATION, "tags": ["service"],
                          "external-doc-url": "https://kafka.apache.org/documentation/#basic_ops_cluster_expansion"}],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": ["kafka_reassign_airflow.hooks.kafka_admin"]}],
        "operators": [{"integration-name": _INTEGRATION, "python-modules": _modules("operators", (
            "planning", "prepare", "throttle", "execute", "cancel", "report"))}],
        "triggers": [{"integration-name": _INTEGRATION, "python-modules": _modules("triggers", ("reassignment",))}],
        "connection-types": [{
            "hook-class-name": "kafka_reassign_airflow.hooks.kafka_admin.KafkaAdminHook",
            "hook-name": "Apache Kafka (reassignment admin)",
            "connection-type": CONN_TYPE,
            "ui-field-behaviour": {
                "hidden-fields": ["schema", "port"],
                "relabeling": {"host": "Bootstrap servers", "login": "SASL username", "password": "SASL password",
                               "extra": "Client config (librdkafka keys)"},
                "placeholders": {
                    "host": "b1:9092,b2:9092",
                    "extra": '{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", '
                             '"ssl.ca.pem": "-----BEGIN CERTIFICATE-----..."}',
                },
            },
        }],
        "extra-links": ["kafka_reassign_airflow.links.PlanChartLink"],
        "notifications": ["kafka_reassign_airflow.notifications.KafkaReassignNotifier"],
        "plugins": [{"name": "kafka_reassign", "plugin-class": "kafka_reassign_airflow.plugin.KafkaReassignPlugin"}],
        "config": {"kafka_reassign": {"description": "Kafka partition reassignment (kafka-reassign provider).",
                                      "options": CONFIG_OPTIONS}},
    }


def _modules(package: str, names: tuple[str, ...]) -> list[str]:
    return [f"kafka_reassign_airflow.{package}.{n}" for n in names]
