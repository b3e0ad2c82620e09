"""The planner's class archive, built and mapped by a real driver JVM (Java and Spark needed)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_reassign.planning.spark import class_archive
from kafka_reassign.planning.spark.spark_session import driver_java_options

SCRIPT = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
df = spark.range(1000)
print("rows", df.groupBy((df.id % 7).alias("k")).count().count())
spark.stop()
"""


def _submit(tmp_path: Path, java_flags: str) -> subprocess.CompletedProcess:
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop("KAFKA_REASSIGN_SPARK_MASTER", None)
    return subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--master", "local[1]",
                           "--conf", "spark.ui.enabled=false", "--driver-java-options", java_flags, str(script)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)


@pytest.mark.slow
def test_a_built_archive_serves_sparks_classes_to_the_next_driver(tmp_path, monkeypatch):
    if class_archive.java_binary() is None:
        pytest.fail("Java is needed for Spark: install a JDK 17 (make setup does not)")
    monkeypatch.setenv(class_archive.ENV, str(tmp_path / "archive"))
    assert driver_java_options(None) == "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"  # none yet
    path = class_archive.build()
    assert path.is_file() and not list(path.parent.glob(".*.tmp"))
    flags = driver_java_options(None)
    assert f"-XX:SharedArchiveFile={path}" in flags
    log = tmp_path / "classes.log"
    # -Xshare:on: a driver that cannot map the archive refuses to start instead of going on without it
    proc = _submit(tmp_path, f"{flags} -Xshare:on -Xlog:class+load=info:file={log}")
    assert proc.returncode == 0 and "rows 7" in proc.stdout, proc.stderr[-2000:]
    from_archive = [ln for ln in log.read_text().splitlines()
                    if "org.apache.spark.sql.SparkSession " in ln or "org.apache.spark.SparkContext " in ln]
    assert from_archive and all("shared objects file (top)" in ln for ln in from_archive), from_archive
    assert "cds" not in proc.stdout.lower()  # the JVM's archive messages stay out of the output


def test_the_command_builds_it_once(tmp_path, monkeypatch):
    where = tmp_path / "archive"
    where.mkdir()
    path = class_archive.archive_path(where)
    assert path is not None
    path.write_bytes(b"built before")
    assert class_archive.main(["--dir", str(where), "--if-missing"]) == 0
    assert path.read_bytes() == b"built before"
