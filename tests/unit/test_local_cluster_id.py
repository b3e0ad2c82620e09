"""The local cluster's id is read back by command lines (kafka-storage, the watchdog)."""
from __future__ import annotations

import argparse

from kafka_local.cluster import _cluster_id


def test_cluster_id_never_reads_as_an_option() -> None:
    # One id in 64 would start with "-" if drawn naively: kafka-storage then refused "-t <id>".
    ids = {_cluster_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert not any(found.startswith("-") for found in ids)
    assert all(len(found) == 22 for found in ids)


def test_equals_form_carries_a_leading_dash() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cluster-id", required=True)
    assert parser.parse_args(["--cluster-id=-abc"]).cluster_id == "-abc"
