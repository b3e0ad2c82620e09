"""Consumer bytes per partition from two samples of the groups' committed offsets
(kafka_reassign.cluster.consumers): plain data, no cluster."""
from __future__ import annotations

import pytest

from kafka_reassign.cluster.consumers import bytes_per_offset, consumer_rates

A, B, C = ("orders", 0), ("orders", 1), ("audit", 0)


def test_bytes_per_offset_is_the_log_size_over_the_offsets_it_holds() -> None:
    assert bytes_per_offset(5000, 100, 600) == 10.0
    assert bytes_per_offset(0, 7, 7) is None  # an empty log holds no offsets: no scale
    assert bytes_per_offset(100, 9, 4) is None


def test_each_group_counts_its_own_advance_summed_per_partition() -> None:
    before = {"billing": {A: 100, B: 50}, "search": {A: 40}}
    after = {"billing": {A: 300, B: 50}, "search": {A: 240}}
    rates = consumer_rates(before, after, {A: 10.0, B: 20.0, C: 5.0}, seconds=4.0)
    # orders-0: (200 + 200) offsets x 10 bytes over 4 s; orders-1: billing committed no progress
    assert rates == {A: pytest.approx(1000.0), B: 0.0, C: 0.0}


def test_a_rewind_a_new_group_and_a_group_that_left_read_nothing() -> None:
    before = {"rewound": {A: 500}, "gone": {A: 10}, "uncommitted": {A: -1}}
    after = {"rewound": {A: 100}, "new": {A: 900}, "uncommitted": {A: 80}}
    assert consumer_rates(before, after, {A: 3.0}, seconds=1.0) == {A: 0.0}


def test_a_partition_read_at_an_unknown_scale_is_left_out_not_zero() -> None:
    before = {"g": {A: 0, B: 0}}
    after = {"g": {A: 10, B: 0}}
    assert consumer_rates(before, after, {A: None, B: None}, seconds=2.0) == {B: 0.0}
