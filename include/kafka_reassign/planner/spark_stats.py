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
* topic spread: a ``groupBy(topic, broker)`` count joined with each topic's allowance finds
  the brokers holding more than their even share plus slack.

What stays in the driver and why: choosing moves is sequential (each accepted move changes the
loads the next choice depends on), and on 100k+ replicas a greedy pass over counters in memory
takes seconds, while a Spark stage per move would take hours. So Spark does the scans and
aggregates, the driver the incremental search (see :mod:`kafka_reassign.planner.goals`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Sequence

from kafka_reassign.planner.cluster import Cluster

DEFAULT_MASTER = "local[2]"
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


def get_spark(master: str | None = None, app_name: str = "kafka-reassign-planner") -> Any:
    """The active SparkSession (under spark-submit) or a new small one.

    :param master: Spark master URL; default ``$KAFKA_REASSIGN_SPARK_MASTER`` or ``local[2]``
    """
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = (SparkSession.builder
               .master(master or os.environ.get(MASTER_ENV) or DEFAULT_MASTER)
               .appName(app_name)
               # small and quick: no UI, few shuffle partitions, modest driver memory
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.memory", os.environ.get("KAFKA_REASSIGN_SPARK_DRIVER_MEMORY", "1g"))
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "true")
               .config("spark.sql.adaptive.enabled", "true"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


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


def aggregates(rdf: Any) -> Aggregates:
    """Load per broker / log dir / rack / (topic, broker) from the replicas frame."""
    from pyspark.sql import functions as F

    per_broker = (rdf.groupBy("broker")
                  .agg(F.sum("size_bytes").alias("bytes"), F.count("*").alias("replicas"),
                       F.sum("is_leader").alias("leaders"),
                       F.sum(F.col("bytes_in_per_sec") * F.col("is_leader")).alias("bytes_in"))
                  .toPandas())
    per_dir = rdf.groupBy("broker", "log_dir").agg(F.sum("size_bytes").alias("bytes")).toPandas()
    per_rack = rdf.groupBy("rack").agg(F.sum("size_bytes").alias("bytes")).toPandas()
    per_tb = rdf.groupBy("topic", "broker").agg(F.count("*").alias("n")).toPandas()
    return Aggregates(
        broker_bytes={int(b): float(v) for b, v in zip(per_broker["broker"], per_broker["bytes"])},
        broker_count={int(b): int(v) for b, v in zip(per_broker["broker"], per_broker["replicas"])},
        broker_leaders={int(b): int(v) for b, v in zip(per_broker["broker"], per_broker["leaders"])},
        broker_bytes_in={int(b): float(v) for b, v in zip(per_broker["broker"], per_broker["bytes_in"])},
        dir_bytes={(int(b), str(d)): float(v)
                   for b, d, v in zip(per_dir["broker"], per_dir["log_dir"], per_dir["bytes"])},
        rack_bytes={str(r): float(v) for r, v in zip(per_rack["rack"], per_rack["bytes"])},
        topic_broker={(str(t), int(b)): int(n)
                      for t, b, n in zip(per_tb["topic"], per_tb["broker"], per_tb["n"])},
    )


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


def topic_spread_excess(spark: Any, rdf: Any, caps: dict[str, int],
                        brokers: Sequence[int]) -> list[tuple[str, int]]:
    """(topic, broker) pairs holding more replicas of the topic than allowed, worst first.

    A ``groupBy(topic, broker)`` count joined with each topic's allowance. (Plain DataFrame
    operations on purpose: Python UDFs / ``applyInPandas`` fail on this PySpark 4.3.0 build, whose
    Python side calls a JVM ``UserDefinedPythonFunction`` constructor that does not exist; SQL
    aggregates also avoid starting Python workers.)

    :param caps: allowed replicas per broker for each movable topic (even share + slack)
    :param brokers: brokers that may give replicas away
    """
    import pandas as pd
    from pyspark.sql import functions as F

    if not caps:
        return []
    caps_df = spark.createDataFrame(pd.DataFrame({"topic": list(caps), "cap": list(caps.values())}),
                                    "topic string, cap int")
    res = (rdf.groupBy("topic", "broker").agg(F.count("*").alias("n"))
           .join(F.broadcast(caps_df), "topic")
           .where(F.col("n") > F.col("cap"))
           .select("topic", "broker", (F.col("n") - F.col("cap")).alias("excess"))
           .toPandas())
    allowed_brokers = {int(b) for b in brokers}
    return [(str(t), int(b)) for t, b, _ in
            sorted(zip(res["topic"], res["broker"], res["excess"]), key=lambda x: (-x[2], x[0], x[1]))
            if int(b) in allowed_brokers]
