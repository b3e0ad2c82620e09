"""The planner's class-data archive: the driver JVM's classes mapped from one file at start.

A local Spark session starts a JVM that loads and verifies some 15,000 classes from Spark's
jars, then loads more through the first jobs. Java's application class-data sharing (AppCDS,
JDK 13+) maps them from an archive written once by a JVM that loaded them: measured on the
2-core development machine, the session's start 7.3-9.1 -> 4.0 s and a first small job 4.5-5.0
-> 2.4-3.1 s (docs/PLANNER.md, "Spark's start").

``python -m kafka_reassign.planning.spark.class_archive`` (run by ``make setup`` and the image
build) writes the archive by planning a small generated cluster under spark-submit; sessions
started by :func:`~kafka_reassign.planning.spark.spark_session.get_spark` use it from then on.
It lives in ``$KAFKA_REASSIGN_SPARK_CLASS_ARCHIVE`` (a directory; ``off`` turns it off), else
``$XDG_CACHE_HOME/kafka-reassign`` or ``~/.cache/kafka-reassign``, named after the Java binary
and the PySpark version it was made with: a new JDK or PySpark gets a new archive, and a JVM
that cannot map one (another class path) starts as it would without it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

ENV = "KAFKA_REASSIGN_SPARK_CLASS_ARCHIVE"
#: The JVM's messages about the archive (classes it skips, a mismatch) stay out of the plan's output.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
#: The training plan: small enough to take seconds, skewed so that every stage moves something.
_BROKERS, _RACKS, _TOPICS, _PARTITIONS = 12, 3, 8, 24


def directory() -> Path | None:
    """Where the archive lives, or None when ``$KAFKA_REASSIGN_SPARK_CLASS_ARCHIVE`` is ``off``."""
    value = os.environ.get(ENV, "")
    if value.strip().lower() == "off":
        return None
    if value:
        return Path(value)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kafka-reassign"


def java_binary() -> Path | None:
    """The Java binary Spark's launcher runs: ``$JAVA_HOME/bin/java``, else the PATH's."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found is not None else None


def archive_path(where: Path) -> Path | None:
    """The archive for this Java binary and PySpark in ``where``; None without Java."""
    import pyspark

    java = java_binary()
    if java is None:
        return None
    stat = java.stat()
    key = json.dumps([str(java), stat.st_size, stat.st_mtime_ns, pyspark.__version__, str(Path(pyspark.__file__).parent)])
    return where / f"spark-driver-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def java_options() -> str:
    """The driver JVM's flags to use the archive, or "" when there is none (or it is off)."""
    where = directory()
    path = archive_path(where) if where is not None else None
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def _training_snapshot(path: Path) -> Path:
    """A small cluster whose lower-numbered brokers hold most replicas, as snapshot lines."""
    from kafka_reassign.planning.spark.snapshot_file import write_lines

    brokers = [{"id": b, "rack": f"rack-{b % _RACKS}", "log_dirs": [{"path": "/var/kafka", "capacity_bytes": 4e11}]}
               for b in range(_BROKERS)]
    topics = [f"train-{t}" for t in range(_TOPICS)]
    header = {"snapshot_lines": 1, "version": 1, "brokers": brokers,
              "topics": [{"name": t, "configs": {"min.insync.replicas": "2"}} for t in topics]}
    rows = ({"topic": t, "partition": p, "replicas": [(p + k) % 2 * _RACKS + k for k in range(_RACKS)],
             "size_bytes": (i + 1) * 1_000_000_000 + p * 7_000_000, "bytes_in_per_sec": 1000.0 * (i + 1) * (1 + p % 3)}
            for i, t in enumerate(topics) for p in range(_PARTITIONS))
    return write_lines(path, header, rows)


def build(where: Path | None = None, timeout: float = 600.0) -> Path:
    """Write the archive: a small plan under spark-submit, whose driver JVM writes the classes it
    loaded when it exits; the file is renamed into place only then, so no session maps half of one.

    :param where: the directory (default :func:`directory`)
    :raises RuntimeError: no Java, the archive is off, or the training plan failed
    """
    import pyspark

    from kafka_reassign.planning.spark.spark_session import driver_java_options

    where = where or directory()
    path = archive_path(where) if where is not None else None
    if path is None:
        raise RuntimeError(f"no class archive: Java not found or ${ENV} is off")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    job = Path(__file__).with_name("spark_job.py")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"  # pyspark's own, on PATH or not
    with tempfile.TemporaryDirectory(prefix="kafka-reassign-class-archive-") as work:
        snapshot = _training_snapshot(Path(work) / "train.jsonl")
        flags = f"{driver_java_options(None, class_archive=False)} -XX:ArchiveClassesAtExit={tmp} {QUIET}"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
        proc = subprocess.run([str(submit), "--master", "local[2]", "--driver-java-options", flags, str(job),
                               "--snapshot", str(snapshot), "--goal", "rebalance", "--no-chart",
                               "--out", str(Path(work) / "plan.json")],
                              capture_output=True, text=True, timeout=timeout, env=env)
    if proc.returncode != 0 or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"the training plan failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    os.replace(tmp, path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafka_reassign.planning.spark.class_archive",
                                     description="Write the planner's Spark driver class-data archive.")
    parser.add_argument("--dir", type=Path, default=None, help=f"where (default ${ENV} or ~/.cache/kafka-reassign)")
    parser.add_argument("--if-missing", action="store_true", help="do nothing when the archive exists")
    args = parser.parse_args(argv)
    where: Any = args.dir or directory()
    existing = archive_path(where) if where is not None else None
    if args.if_missing and existing is not None and existing.is_file():
        print(f"class archive: {existing} (exists)")
        return 0
    try:
        print(f"class archive: {build(where)}")
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"class archive: not written: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
