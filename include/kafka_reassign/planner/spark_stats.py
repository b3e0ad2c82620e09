"""The Spark side of the planner: session, DataFrames, load aggregates, candidate scoring.

What runs on Spark (data-parallel work over every replica of the cluster):

* the snapshot becomes a partitions DataFrame that is exploded (``posexplode`` over the
  zipped replicas and log dirs) into one row per replica;
* load per broker (bytes, replicas, preferred leaders, produce bytes-in of led partitions),
  per log dir, per rack and per (topic, broker) are ``groupBy`` aggregates of that frame;
  they initialise the driver's counters and give the summary its before and after figures
  (the after figures are the same aggregates over the final assignment, a cross-check of the
  driver's incremental bookkeeping);
* rebalance candidates: the replicas on brokers above their byte ceiling, joined with each
  topic's concentration on that broker and ordered by size per broker (a window), so the
  driver only walks the short lists it needs;
* topic spread: the (topic, broker) replica counts come from the same aggregate; the pairs
  above a topic's even share plus slack are read off it.

Python UDFs (``applyInPandas``, ``pandas_udf``) are deliberately not used: on this PySpark
4.3.0 build the Python side calls a JVM ``UserDefinedPythonFunction`` constructor that does not
exist (every Python UDF fails with a Py4JError), and SQL aggregates need no Python workers.

What stays in the driver and why: choosing moves is sequential (each accepted move changes the
loads the next choice depends on), and on 100k+ replicas a greedy pass over counters in memory
takes seconds, while a Spark stage per move would take hours. So Spark does the scans and
aggregates, the driver the incremental search (see :mod:`kafka_reassign.planner.goals`).
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
from dataclasses import dataclass
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from kafka_reassign.planner.cluster import Cluster

DEFAULT_MASTER = "local[2]"


@contextmanager
def _quiet_pandas() -> Iterator[None]:
    """PySpark 4.3 warns on every Arrow conversion that pandas 3 is not fully supported (and
    pandas 3 about a deprecated ``copy`` keyword PySpark passes); the conversions used here
    (numbers, strings, lists of them) are covered by the tests."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        warnings.filterwarnings("ignore", message="The copy keyword is deprecated")
        yield


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _quiet_pandas():
            return fn(*args, **kwargs)
    return wrapper
MASTER_ENV = "KAFKA_REASSIGN_SPARK_MASTER"


@dataclass
class Aggregates:
    """Load per broker, log dir, rack and (topic, broker)."""

    broker_bytes: dict[int, float]
    broker_count: dict[int, int]
    broker_leaders: dict[int, int]
    broker_bytes_in: dict[int, float]
    dir_bytes: dict[tuple[int, str], float]
    rack_bytes: dict[str, float]
    topic_broker: dict[tuple[str, int], int]


def driver_memory(input_bytes: int | None) -> str:
    """Driver JVM memory for an input file of ``input_bytes``: the driver holds brokers and moves,
    but in local mode it is also the executor that caches the parsed partitions (about 4x the
    JSON). ``$KAFKA_REASSIGN_SPARK_DRIVER_MEMORY`` wins."""
    fixed = os.environ.get("KAFKA_REASSIGN_SPARK_DRIVER_MEMORY")
    if fixed:
        return fixed
    mb = 1024 + 4 * (input_bytes or 0) // (1 << 20)
    return f"{min(mb, 6144)}m"


def get_spark(master: str | None = None, app_name: str = "kafka-reassign-planner",
              input_bytes: int | None = None) -> Any:
    """The active SparkSession (under spark-submit) or a new small one.

    :param master: Spark master URL; default ``$KAFKA_REASSIGN_SPARK_MASTER`` or ``local[2]``
    :param input_bytes: size of the snapshot file (sizes the driver memory of a new session)
    """
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    # Python workers must be this interpreter (the venv with our packages), not the PATH's python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName(app_name)
    url = master or os.environ.get(MASTER_ENV)
    if url:
        builder = builder.master(url)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:
        # not under spark-submit (which sets the master itself): a small local session
        builder = builder.master(DEFAULT_MASTER)
    builder = (builder
               # small and quick: no UI, few shuffle partitions, modest driver memory
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", driver_memory(input_bytes))
               # short jobs on few cores: the C1 compiler alone starts faster and leaves the
               # cores to the work (C2 threads compete with it on a 2-core machine)
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "true")
               .config("spark.sql.adaptive.enabled", "true"))
    with _quiet_pandas():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@_quiet
def replicas_frame(spark: Any, cluster: Cluster,
                   placement: Sequence[tuple[Sequence[int], Sequence[str]]] | None = None) -> Any:
    """One row per replica: pi, topic, partition, pos, broker, log_dir, rack, size_bytes,
    bytes_in_per_sec, is_leader.

    :param placement: (replicas, log dirs) per partition index; default the snapshot's
    """
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql.types import (ArrayType, DoubleType, IntegerType, LongType, StringType,
                                   StructField, StructType)

    parts = cluster.partitions
    if placement is None:
        placement = [(p.replicas, p.log_dirs) for p in parts]
    pdf = pd.DataFrame({
        "pi": [p.index for p in parts],
        "topic": [p.topic for p in parts],
        "partition": [p.partition for p in parts],
        "size_bytes": [p.size_bytes for p in parts],
        "bytes_in_per_sec": [p.bytes_in_per_sec for p in parts],
        "replicas": [list(map(int, r)) for r, _ in placement],
        "log_dirs": [list(d) for _, d in placement],
    })
    schema = StructType([
        StructField("pi", LongType(), False), StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False), StructField("size_bytes", DoubleType(), False),
        StructField("bytes_in_per_sec", DoubleType(), False),
        StructField("replicas", ArrayType(IntegerType(), False), False),
        StructField("log_dirs", ArrayType(StringType(), False), False),
    ])
    pdf_brokers = pd.DataFrame({"broker": list(cluster.brokers),
                                "rack": [b.rack_key for b in cluster.brokers.values()]})
    brokers = spark.createDataFrame(pdf_brokers, "broker int, rack string")
    # Arrow does not want a pandas frame with object columns holding lists to be empty
    df = spark.createDataFrame(pdf, schema) if len(pdf) else spark.createDataFrame([], schema)
    exploded = (df.select("pi", "topic", "partition", "size_bytes", "bytes_in_per_sec",
                          F.posexplode(F.arrays_zip("replicas", "log_dirs")).alias("pos", "r"))
                .select("pi", "topic", "partition", "size_bytes", "bytes_in_per_sec", "pos",
                        F.col("r.replicas").alias("broker"), F.col("r.log_dirs").alias("log_dir"),
                        (F.col("pos") == 0).cast("int").alias("is_leader")))
    return exploded.join(F.broadcast(brokers), "broker", "left")


@_quiet
def aggregates(rdf: Any) -> Aggregates:
    """Load per broker / log dir / rack / (topic, broker) from the replicas frame.

    One Spark job: the finest grouping (topic, broker, log dir, rack) with every sum at once; the
    coarser roll-ups are then done on that small result in the driver (at most topics x brokers
    x dirs rows), which saves three more jobs' start-up latency.
    """
    from pyspark.sql import functions as F

    pdf = (rdf.groupBy("topic", "broker", "log_dir", "rack")
           .agg(F.sum("size_bytes").alias("bytes"), F.count("*").alias("replicas"),
                F.sum("is_leader").alias("leaders"),
                F.sum(F.col("bytes_in_per_sec") * F.col("is_leader")).alias("bytes_in"))
           .toPandas())
    per_broker = pdf.groupby("broker")[["bytes", "replicas", "leaders", "bytes_in"]].sum()
    per_dir = pdf.groupby(["broker", "log_dir"])["bytes"].sum()
    per_rack = pdf.groupby("rack")["bytes"].sum()
    per_tb = pdf.groupby(["topic", "broker"])["replicas"].sum()
    return Aggregates(
        broker_bytes={int(b): float(v) for b, v in per_broker["bytes"].items()},
        broker_count={int(b): int(v) for b, v in per_broker["replicas"].items()},
        broker_leaders={int(b): int(v) for b, v in per_broker["leaders"].items()},
        broker_bytes_in={int(b): float(v) for b, v in per_broker["bytes_in"].items()},
        dir_bytes={(int(b), str(d)): float(v) for (b, d), v in per_dir.items()},
        rack_bytes={str(r): float(v) for r, v in per_rack.items()},
        topic_broker={(str(t), int(b)): int(v) for (t, b), v in per_tb.items()},
    )


@_quiet
def rebalance_candidates(spark: Any, rdf: Any, excess: dict[int, float], movable: set[int],
                         topic_caps: dict[str, int] | None) -> dict[int, list[tuple[float, int]]]:
    """Replicas on brokers above their ceiling, per broker, smallest first.

    Only brokers with excess are scanned (a broadcast join), and replicas larger than 3x the
    broker's excess are dropped on Spark: the driver's excess-covering search never needs them
    while a smaller one exists, and it falls back to the smallest candidate it is given.

    :param excess: bytes above the ceiling per over-loaded broker
    :param movable: partition indexes the goal may move
    """
    import pandas as pd
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not excess:
        return {}
    ex = spark.createDataFrame(pd.DataFrame({"broker": list(excess), "excess": list(excess.values())}),
                               "broker int, excess double")
    cand = rdf.join(F.broadcast(ex), "broker").select("broker", "pi", "size_bytes", "excess")
    # keep everything up to 3x the excess plus the smallest replica above it per broker
    w = Window.partitionBy("broker").orderBy("size_bytes")
    cand = (cand.withColumn("rank_small", F.row_number().over(w))
            .where((F.col("size_bytes") <= F.col("excess") * 3) | (F.col("rank_small") <= 50)))
    pdf = cand.select("broker", "pi", "size_bytes").toPandas()
    out: dict[int, list[tuple[float, int]]] = {int(b): [] for b in excess}
    for b, pi, s in zip(pdf["broker"], pdf["pi"], pdf["size_bytes"]):
        if int(pi) in movable:
            out[int(b)].append((float(s), int(pi)))
    for v in out.values():
        v.sort()
    return out
