"""``kafka-local``: start, inspect, fault and stop a real local Apache Kafka KRaft cluster."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kafka_local.cluster import LocalKafka
from kafka_local.jvm import KAFKA_VERSION, LocalKafkaError, kill_all


def _config(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--config takes key=value, got {text!r}")
    return key.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafka-local", description=(
        f"A real Apache Kafka {KAFKA_VERSION} KRaft cluster on 127.0.0.1: one controller and N brokers, "
        "each its own JVM. Every command takes --dir, the cluster's folder."))
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="format storage, start every JVM, wait until every broker is unfenced")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--racks", type=int, default=1)
    up.add_argument("--log-dirs", type=int, default=1, help="log.dirs per broker (JBOD)")
    up.add_argument("--heap-mb", type=int, default=320, help="heap of each broker JVM")
    up.add_argument("--config", type=_config, action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker config, repeatable")
    up.add_argument("--owner-pid", type=int, help="kill the cluster when this process is gone")
    up.add_argument("--timeout", type=float, default=180.0)
    sub.add_parser("status", help="each JVM: role, port, rack, pid, registered")
    sub.add_parser("down", help="stop every JVM of the cluster")
    for name, text in (("kill-broker", "SIGKILL one broker (a crash)"),
                       ("stop-broker", "stop one broker cleanly (controlled shutdown)"),
                       ("start-broker", "start a stopped broker and wait until it is unfenced")):
        p = sub.add_parser(name, help=text)
        p.add_argument("broker_id", type=int)
    for p in sub.choices.values():
        p.add_argument("--dir", required=True, help="the cluster's folder")
    return parser


def run(args: argparse.Namespace) -> int:
    if args.command == "up":
        cluster = LocalKafka(args.dir, args.brokers, args.racks, args.log_dirs, broker_heap_mb=args.heap_mb,
                             configs=dict(args.config), owner_pid=args.owner_pid)
        print(f"BOOTSTRAP={cluster.up(args.timeout)}", flush=True)
        return 0
    if args.command == "down" and not (Path(args.dir) / "cluster.json").exists():
        killed = kill_all(Path(args.dir))  # its state is lost, its JVMs are still found by their marker
        print(f"stopped {len(killed)} JVM(s)")
        return 0
    cluster = LocalKafka.load(args.dir)
    if args.command == "status":
        rows = cluster.status()
        for row in rows:
            print(json.dumps(row))
        return 0 if all(r["running"] for r in rows) else 3
    if args.command == "down":
        killed = cluster.down()
        print(f"stopped {len(killed)} JVM(s)")
        return 0
    action = {"kill-broker": cluster.kill_broker, "stop-broker": cluster.stop_broker,
              "start-broker": cluster.start_broker}[args.command]
    action(args.broker_id)
    print(f"{args.command} {args.broker_id}: done")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except LocalKafkaError as exc:
        print(f"kafka-local: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
