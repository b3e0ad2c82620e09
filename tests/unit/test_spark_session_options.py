"""The planner's local Spark session: JVM flags by snapshot size, and its class archive."""
from __future__ import annotations

import pytest

from kafka_reassign.planning.spark import class_archive
from kafka_reassign.planning.spark.spark_session import C2_FROM_BYTES, driver_java_options


@pytest.fixture(autouse=True)
def archive_dir(tmp_path, monkeypatch):
    """An empty archive directory of this test's own (none of the machine's archive)."""
    monkeypatch.setenv(class_archive.ENV, str(tmp_path / "archive"))
    return tmp_path / "archive"


def test_only_large_snapshots_get_the_optimising_compiler() -> None:
    for small in (None, 0, 4 << 20, C2_FROM_BYTES - 1):  # short jobs: C1 alone starts faster
        assert driver_java_options(small).split() == ["-XX:TieredStopAtLevel=1", "-XX:+UseParallelGC"]
    for large in (C2_FROM_BYTES, 109 << 20):  # 3M replicas: C2 pays for its compiling
        assert driver_java_options(large).split() == ["-XX:+UseParallelGC"]


def test_an_archive_made_for_this_java_and_pyspark_is_mapped_quietly(archive_dir) -> None:
    path = class_archive.archive_path(archive_dir)
    assert path is not None and path.parent == archive_dir and path.suffix == ".jsa"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    flags = driver_java_options(None).split()
    assert flags[:2] == ["-XX:TieredStopAtLevel=1", "-XX:+UseParallelGC"]
    assert f"-XX:SharedArchiveFile={path}" in flags and "-Xlog:cds=off" in flags
    assert driver_java_options(None, class_archive=False).split() == flags[:2]


def test_another_java_gets_another_archive(archive_dir, tmp_path, monkeypatch) -> None:
    mine = class_archive.archive_path(archive_dir)
    fake = tmp_path / "jdk" / "bin" / "java"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    theirs = class_archive.archive_path(archive_dir)
    assert theirs is not None and theirs != mine


def test_off_or_no_java_means_no_archive(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(class_archive.ENV, "off")
    assert class_archive.directory() is None and class_archive.java_options() == ""
    with pytest.raises(RuntimeError, match="Java not found or .* is off"):
        class_archive.build()
    monkeypatch.delenv(class_archive.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert class_archive.directory() == tmp_path / "cache" / "kafka-reassign"
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert class_archive.java_binary() is None and class_archive.archive_path(tmp_path) is None
