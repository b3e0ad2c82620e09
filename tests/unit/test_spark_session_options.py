"""The planner's local Spark session: JVM flags by snapshot size."""
from __future__ import annotations

from kafka_reassign.planning.spark.spark_session import C2_FROM_BYTES, driver_java_options


def test_only_large_snapshots_get_the_optimising_compiler() -> None:
    for small in (None, 0, 4 << 20, C2_FROM_BYTES - 1):  # short jobs: C1 alone starts faster
        assert driver_java_options(small).split() == ["-XX:TieredStopAtLevel=1", "-XX:+UseParallelGC"]
    for large in (C2_FROM_BYTES, 109 << 20):  # 3M replicas: C2 pays for its compiling
        assert driver_java_options(large).split() == ["-XX:+UseParallelGC"]
