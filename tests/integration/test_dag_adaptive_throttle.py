"""The adaptive throttle through the kafka_reassign DAG (dag.test, SQLite, the simulator over TCP).

While the move has long to go, the execute task polls once per wake and defers to its trigger,
so a rate can only change if the rule's state (last sizes, when they were read, last traffic)
survives from one wake to the next in the saved execution state: a wake that restarted the rule
would have no earlier sizes and never change a rate. Mid-run, produce load on a partition that
broker 1 leads rises: broker 1's throttle (leader and follower rate) falls to the floor, rises
back when the load falls, the run succeeds, every throttle config is back to its prior value
(broker 1's rate set before the run included) and the changes are in the progress Variable the
UI page reads.

The executor measures log growth per wall second while the simulator runs ``SCALE`` times faster,
so client traffic measures ``SCALE`` times its simulated write rate; the figures below allow for it.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import airflow_env  # noqa: E402

airflow_env.configure_env()

from sim_snapshots import make_snapshot  # noqa: E402
from test_dag_reassign import FAST, airflow_db, kafka_conn, placement, plan_of  # noqa: E402,F401

pytestmark = [pytest.mark.airflow, pytest.mark.slow, pytest.mark.timeout(180)]

MB = 1_000_000
SCALE = 10.0
START, FLOOR, CEILING, CAPACITY = 20 * MB, 5 * MB, 20 * MB, 100 * MB
#: simulated bytes/s a ``traffic`` partition is written at, and traffic-0's (led by broker 1) under load
QUIET, LOAD = 100_000, 4 * MB
LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
#: set before the run by another tool: the restore must give it back
PRIOR = 300 * MB
PLAN = plan_of(("cold", 0, [4, 2, 3]))  # one KIP-435 step: 4 copies cold-0 from broker 1
FLOOR_HELD_SECONDS = 2.0


def snapshot() -> dict[str, Any]:
    # cold-0 and traffic-0 start on [1, 2, 3], broker 1 leading both
    return make_snapshot(brokers=6, racks=2, topics={
        "cold": {"partitions": 1, "rf": 3, "size_bytes": 3_000 * MB},
        "traffic": {"partitions": 6, "rf": 3, "size_bytes": 10 * MB, "bytes_in_per_sec": QUIET}})


class ProgressSampler:
    """The run's progress as the UI page reads it (the execution Variable), each poll of the watcher."""

    def __init__(self) -> None:
        self.changes: set[str] = set()
        self.broker_1: list[int] = []

    def read(self) -> None:
        import json

        from sqlalchemy import select

        from airflow.models.dagrun import DagRun
        from airflow.models.variable import Variable
        from airflow.utils.session import create_session

        from kafka_reassign_airflow.record_store import VariableExecutionStore

        # The ORM, not the Task SDK: this thread is not the task's, whose SDK channel it must not use.
        # The newest run is this test's: earlier tests of the session leave theirs in the same DB.
        with create_session() as session:
            run_id = session.scalars(select(DagRun.run_id).where(DagRun.dag_id == "kafka_reassign")
                                     .order_by(DagRun.id.desc())).first()
            found = session.scalars(select(Variable).where(
                Variable.key == VariableExecutionStore().key_for(run_id or ""))).first()
            saved = json.loads(found.val) if found is not None else None
        if not saved:
            return
        progress = saved["progress"]
        if progress.get("throttle_change"):
            self.changes.add(progress["throttle_change"])
        if "1" in progress.get("broker_throttles", {}):
            self.broker_1.append(int(progress["broker_throttles"]["1"]))


class LoadScript:
    """Load on broker 1 once the move has run a while, off once its rate held the floor; each poll of
    the Watcher thread also reads broker 1's rates on the cluster and the saved progress."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.progress = ProgressSampler()
        #: broker 1's (leader, follower) throttled rates, as read
        self.rates: list[tuple[int, int]] = []
        self.moving_since: float | None = None
        self.floor_since: float | None = None

    def sample(self) -> None:
        configs = self.cluster.broker_configs(1)
        if LEADER_RATE in configs and FOLLOWER_RATE in configs:
            self.rates.append((int(configs[LEADER_RATE]), int(configs[FOLLOWER_RATE])))
        self.progress.read()

    def moving_a_while(self) -> bool:  # load comes once the rule has had a quiet wake or two
        self.sample()
        if self.moving_since is None and self.cluster.partition_state("cold", 0)["adding"]:
            self.moving_since = time.monotonic()
        return self.moving_since is not None and time.monotonic() - self.moving_since > 2.0

    def load_on(self) -> None:
        self.cluster.set_write_rate("traffic", 0, LOAD)

    def held_at_floor(self) -> bool:  # the floor held a while, so the progress saved shows it
        self.sample()
        if self.floor_since is None and self.rates and self.rates[-1][0] <= FLOOR:
            self.floor_since = time.monotonic()
        return self.floor_since is not None and time.monotonic() - self.floor_since > FLOOR_HELD_SECONDS

    def load_off(self) -> None:
        self.cluster.set_write_rate("traffic", 0, QUIET)

    def finished(self) -> bool:
        self.sample()
        return not self.cluster.partition_state("cold", 0)["adding"]


def test_load_on_broker_1_lowers_its_throttle_across_trigger_wakes(airflow_db, sim_cluster, kafka_conn, monkeypatch):
    from kafka_reassign.cluster.admin import KafkaAdmin
    from kafka_reassign.throttle.specs import ConfigChange
    from kafka_reassign_airflow.conf_check import conf_problems
    from kafka_reassign_airflow.operators.execute import ReassignmentExecuteOperator
    from kafka_reassign_airflow.triggers import reassignment

    # the trigger wakes the task each second here (each minute in production): one poll per wake
    monkeypatch.setattr(reassignment, "PROGRESS_REFRESH_SECONDS", 1.0)
    wakes: list[float] = []
    complete = ReassignmentExecuteOperator.execute_complete

    def counted(self: Any, context: Any, event: Any = None) -> Any:
        wakes.append(time.monotonic())
        return complete(self, context, event)

    monkeypatch.setattr(ReassignmentExecuteOperator, "execute_complete", counted)

    cluster = sim_cluster(snapshot(), time_scale=SCALE)
    kafka_conn(cluster)
    assert cluster.partition_state("traffic", 0)["leader"] == 1 == cluster.partition_state("cold", 0)["leader"]
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs([ConfigChange("broker", "1", LEADER_RATE, None, str(PRIOR))])
    before = airflow_env.throttle_configs(cluster)

    conf = {"plan": PLAN, "throttle_bytes_per_sec": START, "adaptive_throttle": True,
            "throttle_min_bytes_per_sec": FLOOR, "throttle_max_bytes_per_sec": CEILING,
            "broker_network_capacity_bytes_per_sec": CAPACITY, "broker_network_capacities": ["5=90MB/s"],
            "produce_sample_seconds": 0, **FAST}
    dag = airflow_env.load_dag()
    # the trigger-time conf check (REST API, trigger form) takes the adaptive throttle's params
    assert conf_problems("kafka_reassign", {k: dag.params.get_param(k).value for k in dag.params}, conf) == []

    script = LoadScript(cluster)
    with airflow_env.Watcher([(script.moving_a_while, script.load_on), (script.held_at_floor, script.load_off),
                              (script.finished, lambda: None)], interval=0.1, timeout=120) as watcher:
        dr = dag.test(run_conf=conf)
    assert watcher.error is None and watcher.done == [0, 1, 2], watcher.error
    assert dr.state == "success", airflow_env.task_states(dr)
    assert placement(cluster, PLAN) == {"cold-0": [4, 2, 3]}

    # the task deferred and was woken by its trigger many times: each change was made on a wake
    assert len(wakes) >= 5, wakes
    leader = [lead for lead, _follow in script.rates]
    assert START in leader and min(leader) == FLOOR, leader  # 20 MB/s, then down to the floor ...
    low = leader.index(FLOOR)
    assert max(leader[low:]) == CEILING, leader  # ... and up again once the load fell
    assert all(lead == follow for lead, follow in script.rates), script.rates  # both of broker 1's rates move
    assert all(FLOOR <= lead <= CEILING for lead in leader), leader

    # the UI's progress: broker 1's rate and the reason for the change
    assert FLOOR in script.progress.broker_1, script.progress.broker_1
    assert any(c.startswith("broker 1: throttle lowered") and "client traffic" in c for c in script.progress.changes), \
        script.progress.changes

    # every throttle config as before the run: broker 1's own rate back, the run's removed
    after = airflow_env.throttle_configs(cluster)
    assert after == before, (before, after)
    assert after["broker 1"][LEADER_RATE] == str(PRIOR) and FOLLOWER_RATE not in after["broker 1"]
