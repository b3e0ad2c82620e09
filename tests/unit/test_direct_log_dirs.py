"""The rehearsal's direct admin reads the model's DescribeLogDirs answer into the same replica rows,
dir spaces and cordoned dirs as the decoded response of the same answer."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kafka_reassign.cluster.state import DirSpace, ReplicaLogDir
from kafka_reassign.rehearsal.direct import DirectAdmin, _ModelDirs

#: (path, error code, total, usable, [(topic, [(partition, size, offset lag, is future)])])
MODEL_DIRS = [("/d1", 0, 100, 40, [("a", [(0, 10, 0, False), (1, 5, 0, False)]), ("b", [(2, 7, 0, False)])]),
              ("/d2", 0, 0, 7, [("a", [(0, 3, 2, True)])]),  # total 0: not reported
              ("/bad", 57, 0, 0, [])]
CORDONED = frozenset({"/d2"})


def _decoded() -> list[Any]:
    """The same answer as kafka-python decodes it (attributes, not tuples)."""
    return [SimpleNamespace(error_code=code, log_dir=path, total_bytes=total, usable_bytes=usable,
                            is_cordoned=path in CORDONED,
                            topics=[SimpleNamespace(name=name, partitions=[
                                SimpleNamespace(partition_index=i, partition_size=s, offset_lag=lag, is_future_key=f)
                                for i, s, lag, f in parts]) for name, parts in topics])
            for path, code, total, usable, topics in MODEL_DIRS]


def _read(results: Any) -> tuple[list[ReplicaLogDir], dict[int, dict[str, DirSpace]], dict[int, set[str]]]:
    admin = object.__new__(DirectAdmin)  # reading an answer needs no connection
    rows: list[ReplicaLogDir] = []
    dirs: dict[int, dict[str, DirSpace]] = {}
    cordoned: dict[int, set[str]] = {}
    admin._read_log_dirs(3, results, rows, dirs, cordoned)
    return rows, dirs, cordoned


def test_the_model_answer_reads_as_its_decoded_response() -> None:
    direct = _read(_ModelDirs(MODEL_DIRS, CORDONED))
    assert direct == _read(_decoded())
    rows, dirs, cordoned = direct
    assert rows == [ReplicaLogDir(3, "/d1", "a", 0, 10, 0, False), ReplicaLogDir(3, "/d1", "a", 1, 5, 0, False),
                    ReplicaLogDir(3, "/d1", "b", 2, 7, 0, False), ReplicaLogDir(3, "/d2", "a", 0, 3, 2, True)]
    assert dirs == {3: {"/d1": DirSpace(100, 40), "/d2": DirSpace(-1, 7)}}
    assert cordoned == {3: {"/d2"}}
