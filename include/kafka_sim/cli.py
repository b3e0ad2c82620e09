"""`kafka-sim`: generate scenarios, serve a simulated cluster, inject faults into it.

    kafka-sim generate --brokers 6 --racks 3 --topics 4 --partitions 8 --replication-factor 3 \\
        [--skew 0.5] [--seed 1] [--log-dirs 2] [--out FILE]
    kafka-sim serve --snapshot FILE [--time-scale X] [--host H] [--port 0] [--control-port P]
    kafka-sim ctl --control HOST:PORT {stop-broker N | start-broker N | state | snapshot}

``serve`` prints exactly one line ``BOOTSTRAP=host:port,...`` on stdout once every
broker listens (further information goes to stderr) and stops cleanly on SIGTERM or
SIGINT. With ``--control-port`` it also accepts one-line commands on that port:
``stop-broker N``, ``start-broker N``, ``state`` (one JSON line), ``snapshot`` (one
JSON line); each reply is one line, starting with ``OK`` or ``ERR`` for the fault commands.
"""
from __future__ import annotations

import argparse
import json
import logging
import signal
import socket
import socketserver
import sys
import threading
from typing import Any

from kafka_sim.generate import GenerateOptions, broker_load, generate_snapshot


def _positive_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``kafka-sim``."""
    parser = argparse.ArgumentParser(prog="kafka-sim", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="write a realistic cluster snapshot (JSON)")
    g.add_argument("--brokers", type=int, required=True)
    g.add_argument("--racks", type=int, required=True)
    g.add_argument("--topics", type=int, required=True)
    g.add_argument("--partitions", type=int, required=True, help="partitions per topic")
    g.add_argument("--replication-factor", type=int, required=True)
    g.add_argument("--skew", type=_positive_float, default=0.0,
                   help="0 = balanced; higher concentrates load on a third of the brokers")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--log-dirs", type=int, default=1, help="log dirs per broker")
    g.add_argument("--median-partition-bytes", type=float, default=1e9)
    g.add_argument("--size-sigma", type=_positive_float, default=1.0,
                   help="lognormal sigma of partition sizes")
    g.add_argument("--out", default="-", help="output file (default stdout)")

    s = sub.add_parser("serve", help="serve a snapshot as a simulated Kafka cluster")
    s.add_argument("--snapshot", required=True, help="snapshot JSON file")
    s.add_argument("--time-scale", type=_positive_float, default=1.0,
                   help="simulated seconds per wall-clock second")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=0,
                   help="0 = free ports; else brokers listen on PORT, PORT+1, ... in id order")
    s.add_argument("--control-port", type=int, default=None,
                   help="TCP port for fault commands (stop-broker N, start-broker N, state)")
    s.add_argument("--log-level", default="WARNING")

    c = sub.add_parser("ctl", help="send a fault command to a served cluster")
    c.add_argument("--control", required=True, help="HOST:PORT of serve's --control-port")
    c.add_argument("--timeout", type=float, default=30.0)
    c.add_argument("words", nargs="+", help="stop-broker N | start-broker N | state | snapshot")
    return parser


def cmd_generate(args: argparse.Namespace) -> int:
    """``kafka-sim generate``."""
    opts = GenerateOptions(brokers=args.brokers, racks=args.racks, topics=args.topics,
                           partitions=args.partitions, replication_factor=args.replication_factor,
                           skew=args.skew, seed=args.seed, log_dirs=args.log_dirs,
                           median_partition_bytes=args.median_partition_bytes,
                           size_sigma=args.size_sigma)
    try:
        snapshot = generate_snapshot(opts)
    except ValueError as e:
        print(f"kafka-sim generate: {e}", file=sys.stderr)
        return 2
    text = json.dumps(snapshot, indent=1)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        load = broker_load(snapshot)
        summary = {b: {"GB": round(v["bytes"] / 1e9, 2), "replicas": v["replicas"],
                       "leaders": v["leaders"]} for b, v in load.items()}
        print(json.dumps({"out": args.out, "brokers": summary}), file=sys.stderr)
    return 0


class ControlServer(socketserver.ThreadingTCPServer):
    """Line-protocol fault injection for a served cluster.

    :param address: (host, port) to bind
    :param cluster: the running SimulatedCluster
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], cluster: Any) -> None:
        self.cluster = cluster
        super().__init__(address, _ControlHandler)


class _ControlHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for raw in self.rfile:
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            reply = execute_control(self.server.cluster, line)  # type: ignore[attr-defined]
            self.wfile.write((reply + "\n").encode())
            self.wfile.flush()


def execute_control(cluster: Any, line: str) -> str:
    """Run one control command against a cluster and return the reply line.

    :param cluster: SimulatedCluster
    :param line: e.g. ``stop-broker 2``
    """
    words = line.split()
    cmd, rest = words[0].lower(), words[1:]
    try:
        if cmd in ("stop-broker", "start-broker"):
            if len(rest) != 1 or not rest[0].lstrip("-").isdigit():
                return f"ERR usage: {cmd} BROKER_ID"
            broker_id = int(rest[0])
            if broker_id not in cluster.model.brokers:
                return f"ERR unknown broker {broker_id}"
            (cluster.stop_broker if cmd == "stop-broker" else cluster.start_broker)(broker_id)
            return f"OK {cmd} {broker_id}"
        if cmd == "set-network":
            if len(rest) != 2 or not rest[0].isdigit():
                return "ERR usage: set-network BROKER_ID BYTES_PER_SEC"
            cluster.set_network(int(rest[0]), float(rest[1]))
            return f"OK {cmd} {rest[0]} {rest[1]}"
        if cmd == "set-write-rate":
            if len(rest) != 3 or not rest[1].isdigit():
                return "ERR usage: set-write-rate TOPIC PARTITION BYTES_PER_SEC"
            cluster.set_write_rate(rest[0], int(rest[1]), float(rest[2]))
            return f"OK {cmd} {rest[0]} {rest[1]} {rest[2]}"
        if cmd == "state":
            return json.dumps(cluster_state(cluster), sort_keys=True)
        if cmd == "snapshot":
            return json.dumps(cluster.snapshot(), sort_keys=True)
        return (f"ERR unknown command {cmd!r} (stop-broker N, start-broker N, set-network N BYTES, "
                "set-write-rate TOPIC P BYTES, state, snapshot)")
    except Exception as e:  # report, keep the control port serving
        return f"ERR {type(e).__name__}: {e}"


def cluster_state(cluster: Any) -> dict:
    """A compact state summary: time, brokers, in-flight moves, under-replicated partitions.

    :param cluster: SimulatedCluster
    """
    model = cluster.model
    with model.lock:
        model.advance()
        brokers = {str(b.id): {"alive": b.alive, "rack": b.rack,
                               "endpoint": "%s:%d" % cluster.endpoints.get(b.id, ("", 0))}
                   for b in model.brokers.values()}
        under = 0
        offline = 0
        partitions = 0
        for t in model.topics.values():
            for p in t.partitions:
                partitions += 1
                if len(p.isr) < len(p.replicas):
                    under += 1
                if p.leader < 0:
                    offline += 1
        moves = model.list_reassignments(None)
        return {"sim_time": round(model.now(), 3), "brokers": brokers, "partitions": partitions,
                "under_replicated": under, "offline": offline, "reassignments": len(moves),
                "writes": dict(model.writes)}


def cmd_serve(args: argparse.Namespace) -> int:
    """``kafka-sim serve``: run until SIGTERM/SIGINT."""
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
                        stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from kafka_sim.server import SimulatedCluster

    try:
        with open(args.snapshot, encoding="utf-8") as f:
            snapshot = json.load(f)
    except (OSError, ValueError) as e:
        print(f"kafka-sim serve: cannot read snapshot {args.snapshot}: {e}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster = SimulatedCluster(snapshot, time_scale=args.time_scale, host=args.host,
                                   base_port=args.port)
    except (ValueError, KeyError, TypeError) as e:
        print(f"kafka-sim serve: invalid snapshot {args.snapshot}: {e}", file=sys.stderr)
        return 2
    control = None
    try:
        bootstrap = cluster.start()
        if args.control_port is not None:
            control = ControlServer((args.host, args.control_port), cluster)
            threading.Thread(target=control.serve_forever, name="kafka-sim-control",
                             daemon=True).start()
            host, port = control.server_address[:2]
            print(f"CONTROL={host}:{port}", file=sys.stderr, flush=True)
        print(f"BOOTSTRAP={bootstrap}", flush=True)
        while not stop.wait(0.5):
            pass
    except OSError as e:
        print(f"kafka-sim serve: {e}", file=sys.stderr)
        return 1
    finally:
        if control is not None:
            control.shutdown()
            control.server_close()
        cluster.stop()
    return 0


def send_control(address: str, line: str, timeout: float = 30.0) -> str:
    """Send one command line to a control port and return the reply line.

    :param address: HOST:PORT
    :param line: command
    :param timeout: socket timeout in seconds
    """
    host, _, port = address.rpartition(":")
    with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout) as sock:
        sock.sendall((line.strip() + "\n").encode())
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf.decode().strip()


def cmd_ctl(args: argparse.Namespace) -> int:
    """``kafka-sim ctl``."""
    try:
        reply = send_control(args.control, " ".join(args.words), args.timeout)
    except OSError as e:
        print(f"kafka-sim ctl: cannot reach {args.control}: {e}", file=sys.stderr)
        return 1
    print(reply)
    return 1 if reply.startswith("ERR") or not reply else 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kafka-sim`` console script.

    :param argv: arguments (default sys.argv[1:])
    """
    args = build_parser().parse_args(argv)
    if args.command == "generate":
        return cmd_generate(args)
    if args.command == "serve":
        return cmd_serve(args)
    return cmd_ctl(args)


if __name__ == "__main__":
    sys.exit(main())
