"""The reconcile stage's numpy paths give what their plain definitions give."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd

from kafka_reassign.planning.spark.finish import _data_order
from kafka_reassign.planning.spark.loads import _flat


def _plain_order(rows: list) -> list[int]:
    """Executor order by its definition: largest copies first per receiver, receivers interleaved."""
    data = sorted((i for i, r in enumerate(rows) if r[5]), key=lambda i: (-rows[i][4] * len(rows[i][5]),
                                                                           rows[i][0], rows[i][1]))
    rank: dict[int, int] = {}
    keyed = []
    for i in data:
        k = rank.get(rows[i][5][0], 0)
        rank[rows[i][5][0]] = k + 1
        keyed.append((k, -rows[i][4] * len(rows[i][5]), rows[i][0], rows[i][1], i))
    return [x[4] for x in sorted(keyed, key=lambda x: x[:4])]


def test_data_order_is_the_executor_order_by_its_definition():
    rng = random.Random(7)
    rows = []
    for p in range(400):  # few sizes and receivers: many ties on bytes, topics compared as strings
        added = rng.sample(range(8), rng.choice([0, 1, 1, 2, 3]))
        rows.append((rng.choice(["b", "a10", "a9", "Z", "é"]), p % 37, [], added, float(rng.choice([0, 5, 7e9])), added))
    assert _data_order(rows) == _plain_order(rows)
    assert _data_order([("t", 0, [1], [1], 5.0, [])]) == []


def test_flat_is_pandas_explode_without_empty_rows():
    values = [np.array([3, 1]), np.array([], dtype=np.int64), None, [7], np.array([2, 2, 9])]
    rows, flat = _flat(values)
    x = pd.Series(values, dtype=object).explode().dropna()
    assert rows.tolist() == x.index.tolist() and flat.tolist() == [int(v) for v in x]
