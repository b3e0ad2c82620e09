"""Benchmark: a simulated cluster of 100 brokers and 100k partitions.

Serves the cluster in its own process (``kafka-sim serve``) and reports
- start-up time until BOOTSTRAP is printed,
- full Metadata response time over TCP (raw MetadataRequest v12, all topics): the
  first (cold) request and the median of the following (warm) ones, plus the
  response size, decode excluded,
- a kafka-python ``KafkaAdminClient.list_topics()`` call end to end,
- the server process's resident memory (VmRSS, VmHWM).

Run: ``.venv/bin/python -m benchmarks.sim_metadata [--brokers N --topics T --partitions P]``.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _rss_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0])
    return out


def _recv(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionError("closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _metadata_roundtrip(sock: socket.socket, correlation_id: int) -> tuple[float, int]:
    from kafka.protocol.metadata import MetadataRequest

    req = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                          include_topic_authorized_operations=False)
    req.API_VERSION = 12
    req.with_header(correlation_id=correlation_id, client_id="bench")
    payload = req.encode(header=True, framed=True)
    t0 = time.perf_counter()
    sock.sendall(payload)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    body = _recv(sock, size)
    elapsed = time.perf_counter() - t0
    assert struct.unpack(">i", body[:4])[0] == correlation_id
    return elapsed, size


def run(brokers: int, topics: int, partitions: int, rounds: int) -> dict:
    """Serve a generated cluster and measure; returns the figures.

    :param brokers: broker count
    :param topics: topic count
    :param partitions: partitions per topic
    :param rounds: warm metadata requests to time
    """
    from kafka_sim.generate import GenerateOptions, generate_snapshot

    t0 = time.perf_counter()
    snap = generate_snapshot(GenerateOptions(brokers=brokers, racks=10 if brokers >= 10 else 1,
                                             topics=topics, partitions=partitions,
                                             replication_factor=3 if brokers >= 3 else 1,
                                             seed=1, median_partition_bytes=1e8))
    gen_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.json"
        path.write_text(json.dumps(snap))
        del snap
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "kafka_sim.cli", "serve", "--snapshot", str(path)],
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("BOOTSTRAP="):
                raise RuntimeError(f"server did not start: {line!r}")
            startup_s = time.perf_counter() - t0
            bootstrap = line.strip().split("=", 1)[1]
            host, port = bootstrap.split(",")[0].rsplit(":", 1)
            mem_idle = _rss_kib(proc.pid)
            with socket.create_connection((host, int(port)), timeout=120) as sock:
                cold, size = _metadata_roundtrip(sock, 1)
                warm = [_metadata_roundtrip(sock, 2 + i)[0] for i in range(rounds)]
            from kafka import KafkaAdminClient

            t1 = time.perf_counter()
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120000)
            names = admin.list_topics()
            admin.close()
            admin_s = time.perf_counter() - t1
            mem = _rss_kib(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {
        "brokers": brokers, "partitions": topics * partitions, "topics": topics,
        "generate_s": round(gen_s, 2), "startup_s": round(startup_s, 2),
        "metadata_bytes": size, "metadata_cold_ms": round(cold * 1000, 1),
        "metadata_warm_median_ms": round(statistics.median(warm) * 1000, 1) if warm else None,
        "admin_list_topics_s": round(admin_s, 2), "admin_topics_seen": len(names),
        "rss_idle_mib": round(mem_idle.get("VmRSS", 0) / 1024, 1),
        "rss_mib": round(mem.get("VmRSS", 0) / 1024, 1),
        "rss_peak_mib": round(mem.get("VmHWM", 0) / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point (also used by benchmarks.run).

    :param argv: command-line arguments
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args([] if argv is None and __name__ != "__main__" else argv)
    figures = run(args.brokers, args.topics, args.partitions, args.rounds)
    print(f"sim_metadata: {figures['brokers']} brokers, {figures['partitions']} partitions "
          f"({figures['topics']} topics)")
    print(f"  startup {figures['startup_s']} s; full Metadata v12 {figures['metadata_bytes'] / 1e6:.1f} MB: "
          f"cold {figures['metadata_cold_ms']} ms, warm median {figures['metadata_warm_median_ms']} ms; "
          f"kafka-python list_topics {figures['admin_list_topics_s']} s")
    print(f"  server RSS {figures['rss_mib']} MiB (idle {figures['rss_idle_mib']}, peak "
          f"{figures['rss_peak_mib']})")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
