"""Where the per-replica data lives: Spark (any master) or, for small clusters, local pandas.

Both engines read the snapshot-lines file themselves and expose the same four steps, each
returning small pandas frames (brokers-, groups- or moves-sized) to the driver:

* :meth:`loads` - bytes, replicas, leaders and produce rate per (broker, log dir), totals, and
  the partition rows the plan cannot use (unknown brokers, missing sizes...);
* :meth:`search` - the move search, one task per broker group (:func:`search.search_group`);
* :meth:`changes` - moves applied and leaders chosen, one task per partition group
  (:func:`leaders.choose_leaders`), returning only partitions whose replica list changes;
* :meth:`net_candidates` - a few replicas per broker for the network-in pass (:mod:`.network`);
* :meth:`topic_counts`, :meth:`topic_candidates` - replicas per (topic, broker) and the replicas
  of crowded pairs, for the topic-spread goal (:mod:`.spread`).

The same pandas functions run in the Spark tasks and in the local engine, so the two agree.
"""
from __future__ import annotations

import json
from typing import Any

from kafka_reassign.errors import Problem
from kafka_reassign.planning.spark.leaders import (CHANGE_COLUMNS, CHANGE_SCHEMA, LeaderInputs, choose_leaders,
                                                   choose_leaders_moved, with_moves)
from kafka_reassign.planning.spark.search import MOVE_SCHEMA, SearchInputs, search_group
from kafka_reassign.planning.spark.snapshot_file import PARTITION_FIELDS
from kafka_reassign.planning.spark.spark_session import _quiet

PARTITION_SCHEMA = ("topic string, partition int, replicas array<int>, log_dirs array<string>, "
                    "size_bytes double, bytes_in_per_sec double, leader int, remote_bytes double, "
                    "consumer_bytes_per_sec double")
MAX_EXAMPLES = 10
#: Produce and consumer rates are read down to a multiple of 1/RATE_STEPS bytes/s. Every sum of
#: them is then exact (below 2^43 bytes/s), so a broker's total does not depend on the order its
#: replicas are added in: Spark adds in its own order, and a last-bit difference against the
#: limits flipped choices of the network-in pass (300 brokers, 300k replicas: two plans).
RATE_STEPS = 1024.0
RATE_COLUMNS = ("bytes_in_per_sec", "consumer_bytes_per_sec")
#: columns of :meth:`SparkData.net_candidates` (the network-in pass's candidate replicas)
NET_COLUMNS = ("topic", "partition", "pos", "broker", "size_bytes", "rate", "replicas", "rank")


def _task(fn: Any, inputs: Any) -> Any:
    """``fn(pdf, inputs)`` as the one-argument function ``applyInPandas`` wants (a closure, so
    Spark does not try to read type hints off a ``functools.partial``)."""
    def run(pdf):  # noqa: ANN001, ANN202 - no hints: Spark infers the UDF kind from them
        return fn(pdf, inputs)
    return run


def _shared_task(fn: Any, shared: Any) -> Any:
    """``fn(pdf, shared.value)``: inputs in a Spark broadcast are unpickled once per Python
    worker, not once per task as a closure's are (the search's topic-spread counts, millions of
    entries at 3M replicas, took a second a task). ``fn`` must not change its inputs (the local
    engine shares them between groups too)."""
    def run(pdf):  # noqa: ANN001, ANN202 - as in _task
        return fn(pdf, shared.value)
    return run


def _crc_column() -> Any:
    """:func:`_crc` of a frame's topic and partition columns, in Spark."""
    from pyspark.sql import functions as F

    return F.crc32(F.concat_ws("-", "topic", F.col("partition").cast("string")))


def _cogroup_task(fn: Any, inputs: Any) -> Any:
    """``fn(left, right, inputs)`` as the two-argument function a cogroup's ``applyInPandas`` wants."""
    def run(left, right):  # noqa: ANN001, ANN202 - as in _task
        return fn(left, right, inputs)
    return run


def _crc(topic: str, partition: int) -> int:
    import zlib

    return zlib.crc32(f"{topic}-{partition}".encode("utf-8"))


def _problem_text(kind: str, topic: Any, partition: Any, detail: Any) -> Problem:
    where = f"{topic}-{partition}"
    reasons = {"no_partition": "has no partition id", "no_replicas": "has no replicas",
               "missing_size": "has no size_bytes (the snapshot must carry partition sizes)",
               "negative_size": f"size_bytes is negative ({detail})",
               "unknown_broker": f"replicas {detail} name brokers that are not in the header's brokers",
               "duplicate_replica": f"a broker appears twice in replicas {detail}",
               "unknown_topic": "its topic is not in the header's topics",
               "log_dirs_length": f"log_dirs {detail} do not match the replicas",
               "duplicate_partition": f"appears {detail} times"}
    return Problem(f"partition {where}", reasons.get(kind, kind), kind)


class SparkData:
    """The snapshot-lines file as Spark DataFrames.

    :param spark: a SparkSession (its master decides where the work runs)
    :param path: the snapshot-lines file (any URI Spark reads)
    :param header: its header (brokers, topics)
    """

    def __init__(self, spark: Any, path: str, header: dict[str, Any]) -> None:
        from pyspark.sql import functions as F

        self.spark = spark
        self.brokers = [int(b["id"]) for b in header["brokers"]]
        self.topics = [str(t["name"]) for t in header["topics"]]
        raw = spark.read.schema(PARTITION_SCHEMA).json(str(path))
        for c in RATE_COLUMNS:  # floor(x * 2^10) / 2^10 is exact in both engines
            raw = raw.withColumn(c, F.floor(F.col(c) * RATE_STEPS) / RATE_STEPS)
        self.parts = (raw.where(F.col("topic").isNotNull() | F.col("replicas").isNotNull())
                      .withColumn("crc", _crc_column()).persist())

    def _kind(self) -> tuple[Any, Any]:
        """Per partition row: the first problem's kind (null when usable) and its detail.
        Duplicate (topic, partition) rows are caught by the leader stage, which groups by them."""
        from pyspark.sql import functions as F

        # isin over many literals becomes a hash-set lookup (Spark's InSet), not a scan per row
        known = self.brokers
        reps = F.col("replicas")
        checks = [
            ("no_partition", F.col("partition").isNull(), F.lit(None)),
            ("no_replicas", reps.isNull() | (F.size(reps) <= 0), F.lit(None)),
            ("missing_size", F.col("size_bytes").isNull(), F.lit(None)),
            ("negative_size", F.col("size_bytes") < 0, F.col("size_bytes").cast("string")),
            ("unknown_broker", F.exists(reps, lambda x: ~x.isin(known)), F.to_json(reps)),
            ("duplicate_replica", F.size(F.array_distinct(reps)) != F.size(reps), F.to_json(reps)),
            ("unknown_topic", ~F.col("topic").isin(self.topics), F.lit(None)),
            ("log_dirs_length", F.col("log_dirs").isNotNull() & (F.size("log_dirs") != F.size(reps)),
             F.to_json("log_dirs")),
        ]
        kind = F.coalesce(*[F.when(c, F.lit(k)) for k, c, _ in checks])
        detail = F.coalesce(*[F.when(c, d.cast("string")) for _, c, d in checks])
        return kind, detail

    @_quiet
    def loads(self) -> tuple[Any, dict[str, float], list[Problem]]:
        """(per (broker, log_dir) loads, totals, problems) from one scan of the file (which also
        caches the parsed partitions for the next stages); examples of unusable rows are
        fetched by a second job only when there are some."""
        from pyspark.sql import functions as F

        kind, detail = self._kind()
        r = (self.parts.withColumn("kind", kind)
             .select("size_bytes", "bytes_in_per_sec", "kind", "log_dirs", F.size("replicas").alias("rf"),
                     "consumer_bytes_per_sec",
                     F.posexplode_outer("replicas").alias("pos", "broker"))
             .withColumn("log_dir", F.coalesce(F.col("log_dirs")[F.col("pos")], F.lit("any"))))
        lead = F.col("pos") == 0
        per = (r.groupBy("kind", "broker", "log_dir")
               .agg(F.sum("size_bytes").alias("bytes"), F.count("*").alias("replicas"),
                    F.sum(lead.cast("int")).alias("leaders"),
                    F.sum(F.when(lead, F.col("bytes_in_per_sec")).otherwise(0.0)).alias("bytes_in"),
                    F.sum(F.coalesce(F.col("bytes_in_per_sec"), F.lit(0.0))).alias("net_in"),
                    F.sum(F.when(lead, F.col("bytes_in_per_sec") * (F.col("rf") - 1)).otherwise(0.0))
                    .alias("rep_out"),
                    F.sum(F.when(lead, F.coalesce(F.col("consumer_bytes_per_sec"), F.lit(0.0))).otherwise(0.0))
                    .alias("consumed"),
                    F.sum(F.when(lead & F.col("consumer_bytes_per_sec").isNotNull(), F.col("bytes_in_per_sec"))
                          .otherwise(0.0)).alias("measured_in"),
                    F.sum(F.when(lead, F.col("size_bytes")).otherwise(0.0)).alias("partition_bytes"),
                    F.max("pos").alias("max_pos"))
               .toPandas())
        if per["kind"].notna().any():
            bad = (self.parts.select("topic", "partition", kind.alias("kind"), detail.alias("detail"))
                   .where(F.col("kind").isNotNull()).limit(MAX_EXAMPLES * 4).collect())
            return per, {}, [_problem_text(x["kind"], x["topic"], x["partition"], x["detail"]) for x in bad]
        per = per.drop(columns=["kind"])
        return per, _totals(per), []

    def _slot_keys(self, n: int) -> list[int]:
        """Integers ``k_0..k_{n-1}`` that Spark's hash partitioning into ``n`` partitions sends to
        partitions ``0..n-1`` (asked of Spark itself: ``pmod(hash(k), n)``), so repartitioning by
        them gives each search piece a task of its own instead of hash collisions sharing one."""
        from pyspark.sql import functions as F

        keys: dict[int, int] = {}
        span = 8 * n
        while len(keys) < n:
            ks = self.spark.range(span).select(F.col("id").cast("int").alias("k"))
            for r in ks.select("k", F.pmod(F.hash("k"), F.lit(n)).alias("p")).collect():
                keys.setdefault(int(r["p"]), int(r["k"]))
            span *= 4
        return [keys[i] for i in range(n)]

    def _candidates(self, limits: dict[int, tuple[str, float]], exclude_topics: set[str]) -> Any:
        from pyspark.sql import functions as F

        # the pieces with most sources (most candidates) first: Spark starts tasks in partition order
        sources: dict[str, int] = {}
        for g, _ in limits.values():
            sources[g] = sources.get(g, 0) + 1
        names = sorted(sources, key=lambda g: (-sources[g], g))
        slot = dict(zip(names, self._slot_keys(len(names)))) if names else {}
        lim = self.spark.createDataFrame([(b, g, float(x), slot[g]) for b, (g, x) in limits.items()],
                                         "broker int, grp string, max_size double, slot int")
        r = (self.parts.select("topic", "partition", "size_bytes", "crc", "replicas",
                               F.coalesce(F.col("bytes_in_per_sec"), F.lit(0.0)).alias("bytes_in_per_sec"),
                               F.posexplode("replicas").alias("pos", "broker"))
             .join(F.broadcast(lim), "broker"))
        if exclude_topics:
            r = r.where(~F.col("topic").isin(sorted(exclude_topics)))
        return (r.where(F.col("size_bytes") <= F.col("max_size"))
                .select("slot", "grp", "topic", "partition", "pos", "broker", "size_bytes", "replicas", "crc",
                        "bytes_in_per_sec"))

    @_quiet
    def search(self, limits: dict[int, tuple[str, float]], exclude_topics: set[str],
               inputs: SearchInputs) -> Any:
        """The moves, one Spark task per search piece (a repartition to an explicit count, which
        adaptive execution keeps: no two pieces share a task, none waits behind another)."""
        cand = self._candidates(limits, exclude_topics)
        pieces = len({g for g, _ in limits.values()})
        if pieces:
            cand = cand.repartition(pieces, "slot")
        shared = self.spark.sparkContext.broadcast(inputs)
        try:
            return cand.groupBy("slot").applyInPandas(_shared_task(search_group, shared), MOVE_SCHEMA).toPandas()
        finally:
            shared.destroy()

    @_quiet
    def changes(self, moves: Any, exclude_topics: set[str], inputs: LeaderInputs) -> Any:
        """Partitions whose replica list changes (moves applied, leaders chosen)."""
        from pyspark.sql import functions as F

        parts = self.parts
        if exclude_topics:
            parts = parts.where(~F.col("topic").isin(sorted(exclude_topics)))
        cols = parts.select((F.col("crc") % inputs.groups).alias("lgrp"), "topic", "partition", "replicas",
                            "size_bytes", "bytes_in_per_sec", "leader", "remote_bytes", "consumer_bytes_per_sec")
        m = self.spark.createDataFrame(moves[["topic", "partition", "pos", "dst"]],
                                       "topic string, partition int, pos int, dst int")
        m = m.withColumn("lgrp", _crc_column() % inputs.groups)
        # each side goes to its group once: a join on the partition first shuffled the snapshot twice
        out = cols.groupBy("lgrp").cogroup(m.groupBy("lgrp")).applyInPandas(
            _cogroup_task(choose_leaders_moved, inputs), CHANGE_SCHEMA)
        return out.toPandas()

    @_quiet
    def net_candidates(self, side: dict[int, tuple[str, int]], exclude_topics: set[str]) -> Any:
        """Each broker's first replicas in :data:`network.CANDIDATE_ORDER`.

        :param side: broker -> ("hot" (sheds produce rate), "cold" (takes it) or "large" (largest
            first: makes disk room), how many)
        """
        from pyspark.sql import Window, functions as F

        sides = self.spark.createDataFrame([(b, x, n) for b, (x, n) in sorted(side.items())],
                                           "broker int, side string, most int")
        r = (self.parts.select("topic", "partition", "size_bytes", "replicas",
                               F.coalesce(F.col("bytes_in_per_sec"), F.lit(0.0)).alias("rate"),
                               F.posexplode("replicas").alias("pos", "broker"))
             .join(F.broadcast(sides), "broker"))
        if exclude_topics:
            r = r.where(~F.col("topic").isin(sorted(exclude_topics)))
        density = F.col("rate") / F.greatest(F.col("size_bytes"), F.lit(1.0))
        key = (F.when(F.col("side") == "hot", -density)
               .when(F.col("side") == "large", -F.col("size_bytes").cast("double")).otherwise(density))
        w = Window.partitionBy("broker").orderBy(key, "size_bytes", "topic", "partition")
        return (r.withColumn("rank", F.row_number().over(w)).where(F.col("rank") <= F.col("most"))
                .select(*NET_COLUMNS).toPandas())

    @_quiet
    def topic_counts(self, exclude_topics: set[str]) -> Any:
        """Replicas per (topic, broker) of the movable topics (the topic-spread goal's counts)."""
        from pyspark.sql import functions as F

        r = self.parts.select("topic", F.explode("replicas").alias("broker"))
        if exclude_topics:
            r = r.where(~F.col("topic").isin(sorted(exclude_topics)))
        return r.groupBy("topic", "broker").agg(F.count("*").alias("replicas")).toPandas()

    @_quiet
    def topic_candidates(self, pairs: set[tuple[str, int]]) -> Any:
        """Every replica of ``pairs`` (topic, broker) in the snapshot, as :data:`NET_COLUMNS`."""
        from pyspark.sql import functions as F

        if not pairs:
            return _no_candidates()
        wanted = self.spark.createDataFrame(sorted(pairs), "topic string, broker int")
        r = (self.parts.select("topic", "partition", "size_bytes", "replicas",
                               F.coalesce(F.col("bytes_in_per_sec"), F.lit(0.0)).alias("rate"),
                               F.posexplode("replicas").alias("pos", "broker"))
             .join(F.broadcast(wanted), ["topic", "broker"]))
        return r.withColumn("rank", F.lit(0)).select(*NET_COLUMNS).toPandas()

    def close(self) -> None:
        self.parts.unpersist()


def _no_candidates() -> Any:
    import pandas as pd

    return pd.DataFrame(columns=list(NET_COLUMNS))


def _totals(per: Any) -> dict[str, float]:
    """Partitions, bytes of all partitions (each once) and the largest replication factor."""
    return {"partitions": float(per["leaders"].sum()), "partition_bytes": float(per["partition_bytes"].sum()),
            "max_rf": float(per["max_pos"].max() + 1) if len(per) else 0.0}


class LocalData:
    """The same steps in pandas on the driver, for small clusters and tests without a JVM.

    :param path: the snapshot-lines file
    :param header: its header
    """

    def __init__(self, path: str, header: dict[str, Any]) -> None:
        import numpy as np
        import pandas as pd

        self.brokers = {int(b["id"]) for b in header["brokers"]}
        self.topics = {str(t["name"]) for t in header["topics"]}
        rows = []
        with open(path, encoding="utf-8") as f:
            next(f)
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    rows.append({k: d.get(k) for k in PARTITION_FIELDS})
        cols = list(PARTITION_FIELDS)
        self.parts = pd.DataFrame(rows, columns=cols)
        for c in RATE_COLUMNS:  # as SparkData reads them
            self.parts[c] = np.floor(self.parts[c].astype(float) * RATE_STEPS) / RATE_STEPS
        self.parts["crc"] = [_crc(t, p) for t, p in zip(self.parts["topic"], self.parts["partition"])]

    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        seen: dict[tuple[Any, Any], int] = {}
        for t, p, reps, dirs, size in zip(self.parts["topic"], self.parts["partition"],
                                          self.parts["replicas"], self.parts["log_dirs"],
                                          self.parts["size_bytes"]):
            seen[(t, p)] = seen.get((t, p), 0) + 1
            kind, detail = None, None
            if p is None or p != p:  # None, or NaN in a column pandas made float
                kind = "no_partition"
            elif not isinstance(reps, list) or not reps:
                kind = "no_replicas"
            elif size is None or size != size:
                kind = "missing_size"
            elif size < 0:
                kind, detail = "negative_size", size
            elif set(reps) - self.brokers:
                kind, detail = "unknown_broker", json.dumps(reps)
            elif len(set(reps)) != len(reps):
                kind, detail = "duplicate_replica", json.dumps(reps)
            elif t not in self.topics:
                kind = "unknown_topic"
            elif dirs is not None and len(dirs) != len(reps):
                kind, detail = "log_dirs_length", json.dumps(dirs)
            if kind and len(out) < MAX_EXAMPLES * 4:
                out.append(_problem_text(kind, t, p, detail))
        dups = [(k, n) for k, n in seen.items() if n > 1][:MAX_EXAMPLES]
        return out + [_problem_text("duplicate_partition", t, p, n) for (t, p), n in dups]

    def _replicas(self) -> Any:
        r = self.parts.assign(pos=[list(range(len(x))) for x in self.parts["replicas"]],
                              broker=self.parts["replicas"]).explode(["pos", "broker"])
        r["pos"] = r["pos"].astype(int)
        r["broker"] = r["broker"].astype(int)
        r["log_dir"] = [d[p] if isinstance(d, list) and d[p] else "any"
                        for d, p in zip(r["log_dirs"], r["pos"])]
        return r

    def loads(self) -> tuple[Any, dict[str, float], list[Problem]]:
        problems = self.problems()
        if problems:
            return None, {}, problems
        r = self._replicas()
        r["leaders"] = (r["pos"] == 0).astype(int)
        r["net_in"] = r["bytes_in_per_sec"].fillna(0.0)
        r["bytes_in"] = r["net_in"] * r["leaders"]
        r["rep_out"] = r["bytes_in"] * (r["replicas"].str.len() - 1)
        read = r["consumer_bytes_per_sec"].astype(float)
        r["consumed"] = read.fillna(0.0) * r["leaders"]
        r["measured_in"] = r["bytes_in"].where(read.notna(), 0.0)
        r["partition_bytes"] = r["size_bytes"] * r["leaders"]
        per = (r.groupby(["broker", "log_dir"], as_index=False)
               .agg(bytes=("size_bytes", "sum"), replicas=("pos", "size"), leaders=("leaders", "sum"),
                    bytes_in=("bytes_in", "sum"), net_in=("net_in", "sum"), rep_out=("rep_out", "sum"),
                    consumed=("consumed", "sum"), measured_in=("measured_in", "sum"),
                    partition_bytes=("partition_bytes", "sum"),
                    max_pos=("pos", "max")))
        return per, _totals(per), []

    def _candidates(self, limits: dict[int, tuple[str, float]], exclude_topics: set[str]) -> Any:
        r = self._replicas()
        r = r[r["broker"].isin(list(limits)) & ~r["topic"].isin(exclude_topics)].copy()
        r["grp"] = [limits[b][0] for b in r["broker"]]
        r["bytes_in_per_sec"] = r["bytes_in_per_sec"].fillna(0.0).astype(float)
        r = r[r["size_bytes"] <= [limits[b][1] for b in r["broker"]]]
        return r[["grp", "topic", "partition", "pos", "broker", "size_bytes", "replicas", "crc", "bytes_in_per_sec"]]

    def search(self, limits: dict[int, tuple[str, float]], exclude_topics: set[str],
               inputs: SearchInputs) -> Any:
        import pandas as pd

        cand = self._candidates(limits, exclude_topics)
        parts = [search_group(g, inputs) for _, g in cand.groupby("grp", sort=True)]
        return pd.concat(parts, ignore_index=True) if parts else search_group(cand, inputs)

    def changes(self, moves: Any, exclude_topics: set[str], inputs: LeaderInputs) -> Any:
        import pandas as pd

        parts = with_moves(self.parts[~self.parts["topic"].isin(exclude_topics)], moves)
        parts["lgrp"] = parts["crc"] % inputs.groups
        out = [choose_leaders(g, inputs) for _, g in parts.groupby("lgrp", sort=True)]
        return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=list(CHANGE_COLUMNS))

    def net_candidates(self, side: dict[int, tuple[str, int]], exclude_topics: set[str]) -> Any:
        import numpy as np

        r = self._replicas()
        r = r[r["broker"].isin(list(side)) & ~r["topic"].isin(exclude_topics)].copy()
        r["rate"] = r["bytes_in_per_sec"].fillna(0.0).astype(float)
        density = r["rate"] / np.maximum(r["size_bytes"].astype(float), 1.0)
        kind = np.array([side[b][0] for b in r["broker"]], dtype=object)
        r["key"] = np.select([kind == "hot", kind == "large"], [-density, -r["size_bytes"].astype(float)], density)
        r = r.sort_values(["broker", "key", "size_bytes", "topic", "partition"], kind="mergesort")
        r["rank"] = r.groupby("broker").cumcount() + 1
        most = np.array([side[b][1] for b in r["broker"]])
        return r[r["rank"].to_numpy() <= most][list(NET_COLUMNS)].reset_index(drop=True)

    def topic_counts(self, exclude_topics: set[str]) -> Any:
        r = self._replicas()
        r = r[~r["topic"].isin(exclude_topics)]
        return r.groupby(["topic", "broker"], as_index=False).agg(replicas=("pos", "size"))

    def topic_candidates(self, pairs: set[tuple[str, int]]) -> Any:
        if not pairs:
            return _no_candidates()
        r = self._replicas()
        r = r[[(t, b) in pairs for t, b in zip(r["topic"], r["broker"])]].copy()
        r["rate"] = r["bytes_in_per_sec"].fillna(0.0).astype(float)
        r["rank"] = 0
        return r[list(NET_COLUMNS)].reset_index(drop=True)

    def close(self) -> None:
        pass
