"""Calibration of states: the simulator answers reassignment requests like Apache Kafka 4.3.1.

The fast cases of benchmarks/calibration_states.py (each a few seconds on the real side):
refused AlterPartitionReassignments (nonexistent broker, duplicate broker, unknown partition
and topic, a cancel with nothing in progress), a reorder-only reassignment followed by
preferred elections, preferred elections after moves whose first target replica is new, and
a replication factor shrink and growth.
Each runs through the same kafka-python calls on the local real cluster and on a
SimulatedCluster of the same shape; every observation (error names, replica lists in order,
leaders, leader epochs, ISR, ElectLeaders codes) must be equal. The real topics are deleted
by the case runner, so they are not handed to the leftover-throttle check (none is set).
"""
from __future__ import annotations

import os
import time

import pytest

from benchmarks import calibration_states as states

FAST = [c for c in states.cases() if c.fast]


def test_fast_cases_exist():
    names = {c.name for c in FAST}
    assert {"bad requests", "replica order only", "preferred election after move"} <= names, names


@pytest.mark.parametrize("case", FAST, ids=[c.name.replace(" ", "-") for c in FAST])
def test_simulator_sees_what_real_kafka_shows(local_kafka, case):
    topic = f"states-{os.getpid()}-{int(time.time() * 1000)}"
    real = states.on_real(local_kafka.bootstrap_servers, case, topic)
    sim = states.on_simulator(case)
    differ = states.differences(real, sim)
    assert real and not differ, (
        f"{case.name}: the simulator differs from Kafka 4.3.1 on {differ}:\n"
        + "\n".join(f"  {k}: real {states.render(real.get(k))} | simulator {states.render(sim.get(k))}"
                    for k in differ))
