"""Pre-flight with a real producer writing, and rehearsals, on the simulator over real TCP."""
from __future__ import annotations

import re
import threading
import time

import pytest

from kafka_reassign.cluster.admin import KafkaAdmin
from kafka_reassign.errors import PreflightError
from kafka_reassign.run.prepare import prepare
from kafka_reassign.rehearsal.rehearse import read_rehearsal_snapshot, rehearse, rehearse_live
from kafka_reassign.rehearsal.report import RehearsalReport
from sim_snapshots import make_snapshot

MB = 1_000_000


def plan_for(moves: dict[int, list[int]], topic: str = "orders") -> dict:
    return {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": r} for p, r in moves.items()]}


class Producer(threading.Thread):
    """Writes ``rate`` bytes/s to one partition with a real Kafka client until stopped."""

    def __init__(self, bootstrap: str, topic: str, partition: int, rate: float) -> None:
        super().__init__(daemon=True)
        from kafka import KafkaProducer
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=256_000)
        self.topic, self.partition, self.rate = topic, partition, rate
        self.stop = threading.Event()

    def run(self) -> None:
        value = b"x" * 10_000
        tick = 0.1
        per_tick = max(1, round(self.rate * tick / len(value)))
        next_at = time.monotonic()
        while not self.stop.is_set():
            for _ in range(per_tick):
                self.producer.send(self.topic, value, partition=self.partition)
            self.producer.flush()
            next_at += tick
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def close(self) -> None:
        self.stop.set()
        self.join(10)
        self.producer.close()


def test_preflight_refuses_a_written_partition_below_its_stall_point_then_passes(sim_cluster):
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {"partitions": 2, "rf": 3, "size_bytes": 5 * MB}})
    cluster = sim_cluster(snap, time_scale=1.0)
    producer = Producer(cluster.bootstrap_servers, "orders", 0, rate=300_000)
    producer.start()
    try:
        time.sleep(1.0)
        with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            # 2 in-sync followers: the leader's quota carries 2P of in-sync fetches, the new
            # replica needs P more: a 600 KB/s throttle is at the stall point (3 x 300 KB/s).
            with pytest.raises(PreflightError) as info:
                prepare(admin, plan_for({0: [4, 2, 3]}), {"throttle_bytes_per_sec": 600_000,
                                                          "produce_sample_seconds": 3.0})
            text = str(info.value)
            assert "orders-0" in text and "broker(s) 1" in text and "nothing was written" in text
            smallest = [p for p in info.value.problems if p.entry == "throttle_bytes_per_sec"][0].reason
            need = int(re.search(r"/s \((\d+)\)", smallest).group(1))
            # 3 x 300 KB/s of records (+ batch overhead). The producer makes up for a late tick
            # with a burst, so a 3 s sample on a loaded machine can read up to a tick-burst more.
            assert 850_000 <= need <= 1_150_000, smallest
            assert cluster.write_count == 0
            prepared = prepare(admin, plan_for({0: [4, 2, 3]}), {"throttle_bytes_per_sec": need + 500_000,
                                                                 "produce_sample_seconds": 2.0})
            assert prepared.preflight["stall_count"] == 0 and prepared.preflight["rates_source"] == "sampled"
            assert cluster.write_count == 0
    finally:
        producer.close()


def test_rehearsal_offline_reports_time_timeline_and_peaks():
    snap = make_snapshot(brokers=6, racks=3, topics={
        "orders": {"partitions": 4, "rf": 3, "size_bytes": 20 * MB, "bytes_in_per_sec": 100_000,
                   "configs": {"min.insync.replicas": "2"}}})
    plan = plan_for({0: [4, 2, 3], 1: [5, 3, 4], 2: [3, 4, 6]})
    # Two moves per broker: the three moves fit the caps at once, as the pipelined formula assumes
    # (with one, orders-0 and orders-2 both remove a replica from broker 1 and must take turns).
    report = rehearse(snap, plan, {"throttle_bytes_per_sec": 2 * MB, "poll_interval_seconds": 2.0,
                                   "max_movements_per_broker": 2})
    assert report.outcome == "done" and report.partitions == 3
    formula = report.formula["seconds"]
    assert report.predicted_seconds == pytest.approx(formula, rel=0.25), report.format()
    # Moves start together and end at the bound; a poll (2 s) of slack either way.
    assert report.ratio >= 0.8 and report.bound_seconds > 0
    assert report.timeline[-1][1] >= report.bytes_total * 0.99
    assert all(v["in"] <= 2 for v in report.peak_in_flight.values())
    assert [s["partition"] for s in report.slowest][:1] and report.isr_risks == []
    assert report.estimate().source == "rehearsal" and "rehearsal" in report.estimate().describe()
    back = RehearsalReport.from_json(report.to_json())
    assert back.predicted_seconds == report.predicted_seconds and "predicted moving time" in back.format()


def test_rehearsal_of_a_live_cluster_writes_nothing_to_it(sim_cluster):
    snap = make_snapshot(brokers=4, racks=2, topics={"orders": {"partitions": 2, "rf": 2, "size_bytes": 4 * MB,
                                                                "bytes_in_per_sec": 10_000}})
    cluster = sim_cluster(snap, time_scale=1.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        admin.alter_configs([])  # nothing; the snapshot read below must not write either
        live = read_rehearsal_snapshot(admin, sample_seconds=0.5)
    report = rehearse(live, plan_for({0: [3, 2]}), {"throttle_bytes_per_sec": MB, "poll_interval_seconds": 1.0})
    assert report.outcome == "done" and report.predicted_seconds > 0
    assert cluster.write_count == 0
    assert cluster.partition_state("orders", 0)["replicas"] == [1, 2]


def test_rehearsal_refuses_what_the_run_would_refuse():
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {"partitions": 1, "rf": 3, "size_bytes": MB,
                                                                "bytes_in_per_sec": 1 * MB}})
    with pytest.raises(PreflightError):
        rehearse(snap, plan_for({0: [4, 2, 3]}), {"throttle_bytes_per_sec": 2 * MB})


def test_prepare_with_rehearse_makes_the_rehearsal_the_estimate(sim_cluster):
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {"partitions": 3, "rf": 3, "size_bytes": 10 * MB}})
    cluster = sim_cluster(snap, time_scale=1.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        plain = prepare(admin, plan_for({0: [4, 2, 3], 1: [5, 3, 1]}), {"throttle_bytes_per_sec": 2 * MB,
                                                                        "produce_sample_seconds": 0.5})
        prepared = prepare(admin, plan_for({0: [4, 2, 3], 1: [5, 3, 1]}),
                           {"throttle_bytes_per_sec": 2 * MB, "produce_sample_seconds": 0.5, "rehearse": True,
                            "poll_interval_seconds": 1.0}, rehearser=rehearse_live)
    assert plain.estimate["source"] == "formula" and plain.rehearsal is None
    assert prepared.estimate["source"] == "rehearsal" and "rehearsal on a simulated copy" in prepared.report()
    assert prepared.rehearsal["outcome"] == "done"
    assert prepared.estimated_seconds == pytest.approx(prepared.rehearsal["predicted_seconds"])
    assert prepared.estimated_seconds >= 5.0  # 10 MB per new replica at 2 MB/s
    assert cluster.write_count == 0


def test_cli_rehearse_and_validate_offline(tmp_path, capsys):
    import json

    from kafka_reassign.cli import main as cli
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {"partitions": 2, "rf": 3, "size_bytes": 4 * MB,
                                                                "bytes_in_per_sec": 500_000}})
    (tmp_path / "s.json").write_text(json.dumps(snap))
    (tmp_path / "p.json").write_text(json.dumps(plan_for({0: [4, 2, 3]})))
    base = ["--plan", str(tmp_path / "p.json"), "--snapshot", str(tmp_path / "s.json")]
    assert cli.main(["validate", *base, "--throttle", "1MB/s"]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "pre-flight" in err and "orders-0" in err and "1.7 MB/s (1748000)" in err  # 1.1 x (2P + P / 0.85), P = 0.5 MB/s
    assert cli.main(["validate", *base, "--throttle", "5MB/s"]) == cli.EXIT_OK
    assert "estimated moving time" in capsys.readouterr().out
    out_file = tmp_path / "r.json"
    assert cli.main(["rehearse", *base, "--throttle", "5MB/s", "--poll-interval-seconds", "1",
                     "--out", str(out_file)]) == cli.EXIT_OK
    assert "predicted moving time" in capsys.readouterr().out
    assert json.loads(out_file.read_text())["outcome"] == "done"


def test_throttle_someone_set_on_the_live_cluster_is_rehearsed(sim_cluster):
    from kafka_reassign.throttle.specs import LEADER_RATE, ConfigChange
    snap = make_snapshot(brokers=4, racks=2, topics={"orders": {"partitions": 2, "rf": 2, "size_bytes": 40 * MB}})
    cluster = sim_cluster(snap, time_scale=1.0)
    with KafkaAdmin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        # An operator's own throttle on broker 1 (the test's setup, before the rehearsal).
        admin.alter_configs([ConfigChange("broker", "1", LEADER_RATE, None, str(MB))])
        writes = cluster.write_count
        live = read_rehearsal_snapshot(admin, sample_seconds=0.2)
    assert live["brokers"][0]["throttle_configs"] == {LEADER_RATE: str(MB)}
    report = rehearse(live, plan_for({0: [3, 2]}), {"throttle_bytes_per_sec": 4 * MB, "poll_interval_seconds": 0.5})
    # 40 MB from broker 1 under its 1 MB/s leader rate: Kafka's quota lets what its 11-12 s span
    # allows through in a burst (paced by the 4 MB/s follower quota), then nothing until the
    # burst's samples are purged 12 s later: about 12 MB every 12 s, the 4th burst (at 33-36 s)
    # moves the last MB. At the run's own 4 MB/s the first 44 MB would pass at once.
    assert 30 < report.predicted_seconds < 42, report.format()
    assert cluster.write_count == writes


def test_rehearsal_times_a_move_between_log_dirs():
    snap = make_snapshot(brokers=3, racks=3, topics={"orders": {"partitions": 1, "rf": 3, "size_bytes": 30 * MB}})
    plan = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 2, 3],
                                          "log_dirs": ["/data/d1", "any", "any"]}]}
    report = rehearse(snap, plan, {"throttle_bytes_per_sec": 10 * MB, "log_dir_throttle_bytes_per_sec": 2 * MB,
                                   "poll_interval_seconds": 1.0})
    assert report.outcome == "done"
    assert 10 < report.predicted_seconds < 20, report.format()  # 30 MB at 2 MB/s (less the quota's burst)
    assert report.timeline[-1][1] >= 30 * MB


def test_rehearsal_prepares_its_run_once_and_runs_what_it_reports(monkeypatch):
    """The run is prepared once: the report's steps and estimate are those the executor ran."""
    import kafka_reassign.run.prepare as prepare_module
    import kafka_reassign.run.reassign as reassign_module

    calls, runs = [], []
    real_prepare, real_run = prepare_module.prepare, reassign_module.run_reassignment

    def counted(*args, **kwargs):
        calls.append(kwargs.get("run_id"))
        return real_prepare(*args, **kwargs)

    def run(*args, **kwargs):
        result = real_run(*args, **kwargs)
        runs.append(result.prepared)
        return result

    monkeypatch.setattr(prepare_module, "prepare", counted)
    monkeypatch.setattr(reassign_module, "prepare", counted)
    monkeypatch.setattr(reassign_module, "run_reassignment", run)
    snap = make_snapshot(brokers=6, racks=3, topics={"orders": {"partitions": 4, "rf": 3, "size_bytes": 5 * MB}})
    report = rehearse(snap, plan_for({0: [4, 2, 3], 1: [5, 3, 4]}), {"throttle_bytes_per_sec": 2 * MB})
    assert report.outcome == "done" and report.steps == len(runs[0].steps) == 2
    assert calls == ["rehearsal"] and report.formula == runs[0].estimate
