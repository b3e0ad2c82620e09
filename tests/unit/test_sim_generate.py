"""`kafka-sim generate`: realistic, rack-aware, skewable and deterministic snapshots."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from kafka_sim.cli import main
from kafka_sim.generate import GenerateOptions, broker_load, generate_snapshot


def _opts(**kw: object) -> GenerateOptions:
    base = dict(brokers=9, racks=3, topics=6, partitions=12, replication_factor=3, seed=3)
    base.update(kw)
    return GenerateOptions(**base)  # type: ignore[arg-type]


def test_shape_and_snapshot_format() -> None:
    snap = generate_snapshot(_opts(log_dirs=2))
    assert snap["version"] == 1
    assert [b["id"] for b in snap["brokers"]] == list(range(1, 10))
    assert {b["rack"] for b in snap["brokers"]} == {"rack-a", "rack-b", "rack-c"}
    assert all(len(b["log_dirs"]) == 2 and b["log_dirs"][0]["capacity_bytes"] > 0
               for b in snap["brokers"])
    assert len(snap["topics"]) == 6
    assert len({t["name"] for t in snap["topics"]}) == 6
    broker_dirs = {b["id"]: {d["path"] for d in b["log_dirs"]} for b in snap["brokers"]}
    for t in snap["topics"]:
        assert [p["partition"] for p in t["partitions"]] == list(range(12))
        assert int(t["configs"]["min.insync.replicas"]) == 2
        for p in t["partitions"]:
            assert len(p["replicas"]) == len(set(p["replicas"])) == 3
            assert p["leader"] == p["replicas"][0]
            assert p["size_bytes"] > 0 and p["bytes_in_per_sec"] > 0
            assert len(p["log_dirs"]) == 3
            assert all(d in broker_dirs[b] for b, d in zip(p["replicas"], p["log_dirs"]))


@pytest.mark.parametrize("skew", [0.0, 1.0])
def test_rack_aware_placement(skew: float) -> None:
    snap = generate_snapshot(_opts(skew=skew))
    rack = {b["id"]: b["rack"] for b in snap["brokers"]}
    for t in snap["topics"]:
        for p in t["partitions"]:
            assert len({rack[b] for b in p["replicas"]}) == 3, p


def test_deterministic_by_seed() -> None:
    assert generate_snapshot(_opts(seed=11, skew=0.5)) == generate_snapshot(_opts(seed=11, skew=0.5))
    assert generate_snapshot(_opts(seed=11)) != generate_snapshot(_opts(seed=12))


def test_sizes_are_lognormal_like() -> None:
    snap = generate_snapshot(_opts(topics=10, partitions=50, median_partition_bytes=1e8))
    sizes = [p["size_bytes"] for t in snap["topics"] for p in t["partitions"]]
    # Right-skewed: the mean sits well above the median, and the spread covers decades.
    assert statistics.mean(sizes) > 1.2 * statistics.median(sizes)
    assert max(sizes) / min(sizes) > 50
    assert 3e7 < statistics.median(sizes) < 3e8


def test_skew_concentrates_load_so_rebalance_is_worthwhile() -> None:
    def spread(skew: float) -> float:
        load = broker_load(generate_snapshot(_opts(skew=skew, partitions=30)))
        b = [v["bytes"] for v in load.values()]
        return max(b) / (sum(b) / len(b))

    balanced, skewed = spread(0.0), spread(1.5)
    assert balanced < 1.35, balanced
    assert skewed > 1.6, skewed
    hot = broker_load(generate_snapshot(_opts(skew=1.5, partitions=30)))
    leaders = [hot[b]["leaders"] for b in sorted(hot)]
    assert sum(leaders[:3]) > sum(leaders[3:6])  # hot third (brokers 1-3) leads more


def test_invalid_options_rejected() -> None:
    with pytest.raises(ValueError, match="replication-factor"):
        generate_snapshot(_opts(brokers=2, racks=1, replication_factor=3))
    with pytest.raises(ValueError, match="racks"):
        generate_snapshot(_opts(racks=20))


def test_cli_writes_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "snap.json"
    rc = main(["generate", "--brokers", "6", "--racks", "3", "--topics", "3", "--partitions", "4",
               "--replication-factor", "3", "--skew", "0.5", "--seed", "5", "--log-dirs", "2",
               "--out", str(out)])
    assert rc == 0
    snap = json.loads(out.read_text())
    assert snap == generate_snapshot(GenerateOptions(brokers=6, racks=3, topics=3, partitions=4,
                                                     replication_factor=3, skew=0.5, seed=5,
                                                     log_dirs=2))
    assert main(["generate", "--brokers", "2", "--racks", "1", "--topics", "1", "--partitions", "1",
                 "--replication-factor", "3"]) == 2
    assert "replication-factor" in capsys.readouterr().err


def test_bundled_demo_scenario_is_skewed_and_valid() -> None:
    path = Path(__file__).resolve().parents[2] / "include" / "kafka_reassign_demo" / "demo_scenario.json"
    snap = json.loads(path.read_text())
    assert len(snap["brokers"]) == 6 and len({b["rack"] for b in snap["brokers"]}) == 3
    load = broker_load(snap)
    b = [v["bytes"] for v in load.values()]
    assert max(b) > 1.5 * min(b)
    # Small enough for a throttled demo move to take seconds with time scaling.
    assert max(p["size_bytes"] for t in snap["topics"] for p in t["partitions"]) < 2e9
