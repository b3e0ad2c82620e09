"""The planner on a standalone Spark master with one and then two workers (issue 23): the same
plan as ``local[2]``, and the wall time as the cluster grows.

The benchmark starts its own master and workers from pyspark's jars (``bin/spark-class``, one
core and 1 GB each, on 127.0.0.1), plans one shape of :mod:`benchmarks.planner_shapes` with
``--spark-master spark://...`` in a fresh process (as the DAG's Spark connection would), checks
that the plan file is the one ``local[2]`` writes, then adds the second worker and plans again.
Every JVM it started (master, workers and the executors they launch) is stopped by its process
group. ``SPARK_STANDALONE_SIZE`` = ``120k`` (default) or ``1.5m``; ``SPARK_STANDALONE_PIECE_REPLICAS``
sets ``search_piece_replicas`` (default: the planner's).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.planner import SIZES, run_plan
from benchmarks.planner_shapes import generate

LOOPBACK = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """A Spark standalone master and its workers, each JVM in a process group of its own.

    :param work: directory for the JVMs' logs and the workers' scratch space
    """

    def __init__(self, work: Path) -> None:
        import pyspark

        self.work = work
        self.home = Path(pyspark.__file__).resolve().parent
        self.port, self.ui = _free_port(), _free_port()
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": LOOPBACK}

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def _start(self, name: str, *args: str) -> None:
        log = open(self.work / f"{name}.log", "wb")  # noqa: SIM115 - closed with the JVM
        self.procs.append(subprocess.Popen([str(self.home / "bin" / "spark-class"), *args], env=self.env,
                                           stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        log.close()

    def start_master(self, timeout: float = 60.0) -> None:
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                    "--port", str(self.port), "--webui-port", str(self.ui))
        self._wait(lambda: self.alive_workers() >= 0, timeout, "the master's web UI")

    def add_worker(self, timeout: float = 60.0) -> None:
        """One more worker (1 core, 1 GB); returns once the master counts it alive."""
        n = len(self.procs)
        scratch = self.work / f"worker-{n}"
        scratch.mkdir(exist_ok=True)
        self._start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", LOOPBACK,
                    "--cores", "1", "--memory", "1g", "--webui-port", str(_free_port()),
                    "--work-dir", str(scratch))
        self._wait(lambda: self.alive_workers() >= n, timeout, f"worker {n}")

    def alive_workers(self) -> int:
        """Workers the master counts alive (-1 while its web UI does not answer)."""
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.ui}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return -1

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        end = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > end or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"{what} did not come up (logs in {self.work})")
            time.sleep(0.5)

    def stop(self) -> None:
        """Stop every JVM started here: workers first (they stop their executors), then the master."""
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs = []

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _plan(s: Any, options: dict[str, Any], out: Path, master: str) -> dict[str, Any]:
    wall, summary, err = run_plan(s.path, s.goal, options, out, master=master)
    if summary is None:
        raise RuntimeError(f"plan on {master} failed: {err.strip()[-2000:]}")
    t = summary["timings"]
    return {"master": master, "wall_s": round(wall, 1), "search_s": t["search_s"],
            "spark_start_s": t["spark_start_s"], "read_s": t["read_and_aggregate_s"], "leaders_s": t["leaders_s"],
            "pieces": summary["search_pieces"], "moves": summary["replica_movements"],
            "plan": json.loads(out.read_text())}


def main() -> int:
    size = os.environ.get("SPARK_STANDALONE_SIZE", "120k").lower()
    per_piece = os.environ.get("SPARK_STANDALONE_PIECE_REPLICAS")
    brokers, topics, parts = SIZES[size]
    old = os.environ.get("SPARK_LOCAL_IP")
    os.environ["SPARK_LOCAL_IP"] = LOOPBACK  # the driver process too: executors call it back there
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="spark-standalone-") as tmp:
            work = Path(tmp)
            s = generate("skew", topics, parts, brokers, work / "skew.jsonl")
            options = {"extra": {"search_piece_replicas": int(per_piece)}} if per_piece else {}
            rows.append(_plan(s, options, work / "local.json", "local[2]"))
            with StandaloneCluster(work) as cluster:
                cluster.start_master()
                for n in (1, 2):
                    cluster.add_worker()
                    rows.append({**_plan(s, options, work / f"standalone-{n}.json", cluster.url), "workers": n})
    finally:
        if old is None:
            os.environ.pop("SPARK_LOCAL_IP", None)
        else:
            os.environ["SPARK_LOCAL_IP"] = old
    same = all(r["plan"] == rows[0]["plan"] for r in rows)
    print(f"skew {size} ({int(s.replicas.size):,} replicas), {rows[0]['pieces']} search pieces; "
          "2 cores shared with other work, so wall times are noisy")
    for r in rows:
        where = f"standalone, {r['workers']} worker(s) x 1 core" if "workers" in r else r["master"]
        print(f"  {where:<34} wall {r['wall_s']:>6.1f} s  (spark start {r['spark_start_s']:.1f}, read "
              f"{r['read_s']:.1f}, search {r['search_s']:.1f}, leaders {r['leaders_s']:.1f}), {r['moves']} moves")
    print(f"  same plan on every master: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
