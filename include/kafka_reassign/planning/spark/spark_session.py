"""The planner's Spark session: the active one under spark-submit, or a small local one.

The session's master decides where the planning runs (``local[2]`` by default; point
``spark_master``, ``$KAFKA_REASSIGN_SPARK_MASTER`` or the DAG's Spark connection at a standalone,
YARN or Kubernetes master and the same job runs there). What runs on it is in
:mod:`kafka_reassign.planning.spark.data`.
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator

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


def driver_memory(input_bytes: int | None) -> str:
    """Driver JVM memory for an input file of ``input_bytes``: the driver holds brokers and moves,
    but in local mode it is also the executor that caches the parsed partitions (about 4x the
    JSON). ``$KAFKA_REASSIGN_SPARK_DRIVER_MEMORY`` wins."""
    fixed = os.environ.get("KAFKA_REASSIGN_SPARK_DRIVER_MEMORY")
    if fixed:
        return fixed
    mb = 1024 + 4 * (input_bytes or 0) // (1 << 20)
    return f"{min(mb, 6144)}m"


#: Snapshot files from this size on (about 900k replicas) get the JVM's optimising compiler.
C2_FROM_BYTES = 32 << 20


def driver_java_options(input_bytes: int | None, class_archive: bool = True) -> str:
    """The driver JVM's flags: a short job on few cores starts faster with the C1 compiler alone
    (C2's threads compete with the work on a 2-core machine); a long one wins it back: at 3M
    replicas (a 109 MB file) C2 took the read 28.6 -> 17-20 s and the leader stage's join and
    shuffle 38.3 -> 19-24 s, the JVM 100 -> 84-92 CPU s, compiling included (docs/PLANNER.md).

    :param class_archive: map the classes from the planner's class archive when there is one
        (:mod:`~kafka_reassign.planning.spark.class_archive`)
    """
    from kafka_reassign.planning.spark.class_archive import java_options

    c1_only = "" if (input_bytes or 0) >= C2_FROM_BYTES else "-XX:TieredStopAtLevel=1 "
    archive = java_options() if class_archive else ""
    return f"{c1_only}-XX:+UseParallelGC {archive}".strip()


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
    if url is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        url = DEFAULT_MASTER  # not under spark-submit (which sets the master itself): a small local session
    if url:
        builder = builder.master(url)
    if url and url.startswith("local"):
        # a local session reads in two tasks; on a cluster (or under spark-submit's own
        # settings) the default is the executors' cores, so the file is read and cached in as
        # many parts as the cluster can work on at once
        builder = builder.config("spark.default.parallelism", "2")
    builder = (builder
               # small and quick: no UI, few shuffle partitions, modest driver memory
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.driver.memory", driver_memory(input_bytes))
               .config("spark.driver.extraJavaOptions", driver_java_options(input_bytes))
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.execution.arrow.pyspark.fallback.enabled", "true")
               .config("spark.sql.adaptive.enabled", "true"))
    with _quiet_pandas():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def ship_package(spark: Any) -> None:
    """Send the ``kafka_reassign`` package to the executors of a non-local master (the search
    and leader tasks run its functions there); local masters import it from this process's path.
    Executors need pandas and pyarrow, as for any pandas UDF."""
    import shutil
    import tempfile
    from pathlib import Path

    import kafka_reassign

    if str(spark.sparkContext.master).startswith("local"):
        return
    root = Path(kafka_reassign.__file__).resolve().parent
    out = Path(tempfile.mkdtemp(prefix="kafka-reassign-pyfiles-")) / "kafka_reassign"
    spark.sparkContext.addPyFile(shutil.make_archive(str(out), "zip", root.parent, root.name))
