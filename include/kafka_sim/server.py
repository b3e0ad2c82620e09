"""The wire side of the simulated cluster: one asyncio TCP listener per broker.

Requests are framed and decoded with kafka-python's protocol classes, handled by
:mod:`kafka_sim.handlers` against the shared :class:`~kafka_sim.model.ClusterModel`,
and encoded back with the right response header (v0, or v1 with tagged fields for
flexible versions; ApiVersions always v0). Like a Kafka broker, each connection is
served one request at a time, in order. A stopped broker's listener is closed and
its connections are dropped, so clients see exactly what a dead broker looks like.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import threading
import time
from collections import Counter
from typing import Any, Iterable

from kafka.protocol.api_header import RequestHeader

from kafka_sim.apiversions import REQUEST_CLASSES, SUPPORTED
from kafka_sim.connection import CLOSE, Connection, ConnectionHook
from kafka_sim.faults import BrokerFaults
from kafka_sim.cordons import CORDON_VERSION, DESCRIBE_LOG_DIRS_KEY
from kafka_sim.handlers import Handlers, RawBody, RequestContext
from kafka_sim.model import ClusterModel

log = logging.getLogger(__name__)

MAX_FRAME = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes default
TICK_SECONDS = 0.01
_INT32 = struct.Struct(">i")
_REQ_PREFIX = struct.Struct(">hhi")


class ClusterRuntime:
    """Event-loop side state shared by the listeners and the handlers.

    Two extension points, both unset by default: ``ssl_context`` (listeners speak TLS) and
    ``connection_hook`` (see :data:`ConnectionHook`, e.g. a SASL handshake before any API).

    :param model: the cluster model
    :param host: address every listener binds and advertises
    :param hidden_api_keys: API keys left out of ApiVersions and refused like an unknown API
    """

    def __init__(self, model: ClusterModel, host: str, hidden_api_keys: frozenset[int] = frozenset()) -> None:
        self.model = model
        self.host = host
        # What this cluster advertises and serves (an older broker lacks some APIs, e.g. KIP-455's 45/46).
        self.supported = {k: v for k, v in SUPPORTED.items() if k not in hidden_api_keys}
        self.endpoints: dict[int, tuple[str, int]] = {}
        self.servers: dict[int, asyncio.base_events.Server] = {}
        self.connections: dict[int, set[asyncio.Task[Any]]] = {}
        self.writers: dict[int, set[asyncio.StreamWriter]] = {}
        self.handlers = Handlers(self)
        self.ssl_context: ssl.SSLContext | None = None
        self.connection_hook: ConnectionHook | None = None
        self._change: asyncio.Event | None = None
        self._waiters = 0  # long-poll requests in wait_change now
        self._someone_waits: asyncio.Event | None = None
        #: (api key, client id) -> requests served: what a client costs the cluster, seen from its side
        self.request_counts: dict[tuple[int, str | None], int] = {}
        self._ticker: asyncio.Task[Any] | None = None
        #: broker id -> (API keys that stall, or None for all; released when the event is set)
        self.frozen: dict[int, tuple[frozenset[int] | None, asyncio.Event]] = {}

    # --------------------------------------------------------------- wake-ups
    def notify(self) -> None:
        """Wake every waiter (long-poll fetches, acks=all produces): state changed."""
        # Swap in a fresh event, then release everyone waiting on the old one, so a
        # waiter that re-checks and waits again sleeps until the next change.
        old, self._change = self._change, asyncio.Event()
        if old is not None:
            old.set()

    async def wait_change(self, timeout: float) -> None:
        """Sleep until the next tick or state change, at most ``timeout`` seconds.

        :param timeout: seconds
        """
        if timeout <= 0 or self._change is None:
            return
        event = self._change
        self._waiters += 1
        if self._someone_waits is not None:
            self._someone_waits.set()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            self._waiters -= 1

    async def _tick(self) -> None:
        # In manual time (time_scale 0) only advance_by moves the clock and runs the physics: a
        # wall-clock tick would find nothing to integrate, yet its settling of what needs no time
        # (between two admin requests, wherever the 10 ms fell) made a rehearsal's answers depend
        # on wall timing. It still wakes the long-poll waiters, who re-check what advance_by changed.
        # Nor does it tick while nobody waits: a rehearsal sends no long polls, and its ticks
        # were a thread taking the interpreter lock from the rehearsal 100 times a second.
        physics = self.model.time_scale > 0
        self._someone_waits = asyncio.Event()
        while True:
            if not physics and not self._waiters:
                self._someone_waits.clear()
                await self._someone_waits.wait()
            await asyncio.sleep(TICK_SECONDS)
            if physics:
                try:
                    self.model.advance()
                except Exception:  # keep the cluster serving; the failure is in the log
                    log.exception("model.advance() failed")
            self.notify()

    # --------------------------------------------------------------- listeners
    async def start(self, ports: dict[int, int]) -> None:
        """Open one listener per broker and start the ticker.

        :param ports: broker id -> port (0 = any free port)
        """
        self._change = asyncio.Event()
        for broker_id in sorted(self.model.brokers):
            await self.open_listener(broker_id, ports.get(broker_id, 0))
            if not self.model.brokers[broker_id].alive:
                await self.close_listener(broker_id)
        self._ticker = asyncio.get_running_loop().create_task(self._tick())

    async def open_listener(self, broker_id: int, port: int) -> None:
        """Listen for one broker (same port as before when restarting).

        :param broker_id: broker id
        :param port: port to bind, 0 for any
        """
        if broker_id in self.servers:
            return
        self.connections.setdefault(broker_id, set())
        self.writers.setdefault(broker_id, set())

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.connections[broker_id].add(task)
            self.writers[broker_id].add(writer)
            try:
                await self._serve(broker_id, reader, writer)
            finally:
                self.connections[broker_id].discard(task)
                self.writers[broker_id].discard(writer)

        server = await asyncio.start_server(on_connect, self.host, port, reuse_address=True,
                                            backlog=512, ssl=self.ssl_context)
        bound = server.sockets[0].getsockname()[1]
        self.servers[broker_id] = server
        self.endpoints[broker_id] = (self.host, bound)

    async def close_listener(self, broker_id: int) -> None:
        """Stop accepting and drop every open connection of one broker.

        :param broker_id: broker id
        """
        server = self.servers.pop(broker_id, None)
        if server is not None:
            server.close()
        for writer in list(self.writers.get(broker_id, ())):
            transport = writer.transport
            if transport is not None:
                transport.abort()
        for task in list(self.connections.get(broker_id, ())):
            task.cancel()
        if server is not None:
            try:
                await asyncio.wait_for(server.wait_closed(), 2)
            except asyncio.TimeoutError:
                pass

    async def shutdown(self) -> None:
        """Close every listener and stop the ticker."""
        if self._ticker is not None:
            self._ticker.cancel()
        for broker_id in list(self.servers):
            await self.close_listener(broker_id)
        self.notify()

    # --------------------------------------------------------------- per connection
    async def _serve(self, broker_id: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        conn = Connection(broker_id, writer.get_extra_info("peername"))
        try:
            while True:
                size = _INT32.unpack(await reader.readexactly(4))[0]
                if size < 8 or size > MAX_FRAME:
                    log.warning("broker %d: invalid frame size %d, closing", broker_id, size)
                    return
                frame = await reader.readexactly(size)
                await self._maybe_stall(broker_id, frame)
                out = None
                if self.connection_hook is not None:
                    out = await self.connection_hook(conn, *_REQ_PREFIX.unpack_from(frame, 0), frame)
                if out is None:
                    out = await self._process(broker_id, frame)
                if out is None:
                    continue
                if out is CLOSE:
                    return
                if isinstance(out, list):
                    writer.writelines(out)
                else:
                    writer.write(out)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # the transport may already be gone
                pass

    async def _maybe_stall(self, broker_id: int, frame: bytes) -> None:
        """Hold a frozen broker's request (and every later one on its connection) until thawed."""
        frozen = self.frozen.get(broker_id)
        if frozen is not None and (frozen[0] is None or _REQ_PREFIX.unpack_from(frame, 0)[0] in frozen[0]):
            await frozen[1].wait()

    async def _process(self, broker_id: int, frame: bytes) -> Any:
        """Decode one request frame, run its handler, encode the framed response."""
        api_key, api_version, correlation_id = _REQ_PREFIX.unpack_from(frame, 0)
        supported = self.supported.get(api_key)
        if api_key == 18 and (supported is None or api_version > supported[1]):
            # KIP-511: too-new ApiVersions gets a v0 error reply naming our range.
            resp = Handlers.api_versions_unsupported(api_version)
            return frame_response(correlation_id, resp.encode(version=0), flexible_header=False)
        if supported is None or not supported[0] <= api_version <= supported[1]:
            # Kafka closes the connection on an API or version it does not support.
            log.warning("broker %d: unsupported api %d v%d, closing connection",
                        broker_id, api_key, api_version)
            return CLOSE
        cls = REQUEST_CLASSES[api_key]
        try:
            request = cls.decode(frame, version=api_version, header=True)
        except Exception:
            log.warning("broker %d: cannot decode api %d v%d, closing connection",
                        broker_id, api_key, api_version, exc_info=True)
            return CLOSE
        header: RequestHeader = request.header
        ctx = RequestContext(broker_id, api_key, api_version, correlation_id,
                             getattr(header, "client_id", None))
        counted = (api_key, ctx.client_id)
        self.request_counts[counted] = self.request_counts.get(counted, 0) + 1
        try:
            self.model.advance()
            response = await self.handlers.handle(ctx, request)
        except Exception:
            # Kafka would answer UNKNOWN_SERVER_ERROR; dropping the connection is what
            # clients also handle (they retry), and the traceback lands in our log.
            log.exception("broker %d: handler for api %d v%d failed", broker_id, api_key, api_version)
            return CLOSE
        if response is None:
            return None
        if isinstance(response, RawBody):
            return frame_response(correlation_id, response.body, response.flexible if api_key != 18 else False)
        body = response.encode(version=api_version)
        flexible = response.flexible_version_q(api_version) and api_key != 18
        return frame_response(correlation_id, body, flexible)


def frame_response(correlation_id: int, body: bytes | list[bytes], flexible_header: bool) -> bytes | list[bytes]:
    """Size + response header (v1 adds an empty tagged-field section) + body.

    A body given in parts comes back as a list of buffers (written without joining them:
    an all-topics Metadata response of 100k partitions is megabytes).
    """
    header = _INT32.pack(correlation_id) + (b"\x00" if flexible_header else b"")
    if isinstance(body, list):
        return [_INT32.pack(len(header) + sum(len(b) for b in body)) + header, *body]
    return _INT32.pack(len(header) + len(body)) + header + body


class SimulatedCluster(BrokerFaults):
    """A simulated multi-broker Kafka cluster served over TCP from a daemon thread.

    :param snapshot: cluster snapshot (docs/FORMATS.md)
    :param time_scale: simulated seconds per wall-clock second
    :param host: address to bind and advertise
    :param base_port: 0 for ephemeral ports, else broker i (in id order) listens on base_port + i
    :param security: listener security (:class:`kafka_sim.auth.ListenerSecurity`); None = PLAINTEXT
    :param hidden_api_keys: API keys the brokers neither advertise nor serve, to play an older
        Kafka (e.g. ``{45, 46}``: a broker before 2.4, without KIP-455 reassignments)
    :param cordons: KIP-1066 cordoned log dirs (Kafka 4.3, metadata.version 4.3-IV0+, DescribeLogDirs
        v5); False plays a Kafka 4.1 cluster: DescribeLogDirs v4 and ``cordoned.log.dirs`` refused
    """

    def __init__(self, snapshot: dict, time_scale: float = 1.0, host: str = "127.0.0.1",
                 base_port: int = 0, security: Any = None, hidden_api_keys: Iterable[int] = (),
                 cordons: bool = True) -> None:
        self.model = ClusterModel(snapshot, time_scale=time_scale)
        self.model.cordons_enabled = cordons
        self.host = host
        self.base_port = base_port
        self._runtime = ClusterRuntime(self.model, host, frozenset(hidden_api_keys))
        if not cordons and DESCRIBE_LOG_DIRS_KEY in self._runtime.supported:
            low, high = self._runtime.supported[DESCRIBE_LOG_DIRS_KEY]
            self._runtime.supported[DESCRIBE_LOG_DIRS_KEY] = (low, min(high, CORDON_VERSION - 1))
        if security is not None:  # a kafka_sim.auth.ListenerSecurity: TLS and/or SASL listeners
            security.install(self._runtime)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # --------------------------------------------------------------- lifecycle
    def start(self) -> str:
        """Start the event loop thread and every broker's listener; returns the bootstrap list."""
        if self._loop is not None:
            return self.bootstrap_servers
        ready = threading.Event()
        loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            ready.set()
            loop.run_forever()
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=run, name="kafka-sim", daemon=True)
        self._thread.start()
        ready.wait()
        ports = {}
        if self.base_port:
            ports = {b: self.base_port + i for i, b in enumerate(sorted(self.model.brokers))}
        try:
            self._call(self._runtime.start(ports))
        except Exception:
            self.stop()
            raise
        return self.bootstrap_servers

    def stop(self) -> None:
        """Close every listener and stop the loop thread (idempotent)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            fut = asyncio.run_coroutine_threadsafe(self._runtime.shutdown(), loop)
            fut.result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            if self._thread is not None:
                self._thread.join(10)

    def __enter__(self) -> SimulatedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, coro: Any, timeout: float = 30) -> Any:
        if self._loop is None:
            raise RuntimeError("cluster is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def _notify(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._runtime.notify)

    # --------------------------------------------------------------- views
    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated host:port of every broker that listens."""
        eps = self._runtime.endpoints
        return ",".join(f"{h}:{p}" for b, (h, p) in sorted(eps.items()))

    @property
    def endpoints(self) -> dict[int, tuple[str, int]]:
        """broker id -> (host, port)."""
        return dict(self._runtime.endpoints)

    @property
    def writes(self) -> Counter:
        """Accepted write requests by API name (not produce)."""
        with self.model.lock:
            return Counter(self.model.writes)

    @property
    def request_counts(self) -> dict[tuple[int, str | None], int]:
        """(API key, client id) -> requests the brokers served so far (a copy)."""
        return dict(self._runtime.request_counts)

    @property
    def write_count(self) -> int:
        """Total accepted write requests."""
        return sum(self.writes.values())

    def snapshot(self) -> dict:
        """Current state in the snapshot format."""
        with self.model.lock:
            self.model.advance()
            return self.model.snapshot()

    def partition_state(self, topic: str, partition: int) -> dict:
        """replicas, isr, leader, adding, removing, log_dirs of one partition.

        :param topic: topic name
        :param partition: partition index
        """
        with self.model.lock:
            self.model.advance()
            fn = getattr(self.model, "partition_state", None)
            if fn is not None:
                return fn(topic, partition)
            p = self.model.topics[topic].partitions[partition]
            return {"replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader,
                    "leader_epoch": p.leader_epoch, "adding": list(p.adding),
                    "removing": list(p.removing),
                    "log_dirs": [p.replica(b).log_dir for b in p.replicas]}

    def quota_state(self, broker_id: int) -> dict[str, dict[str, float]]:
        """Leader and follower replication quota of a broker: bound, recorded rate, window, allowance.

        :param broker_id: broker id
        """
        return self.model.quota_state(broker_id)

    def sim_time(self) -> float:
        """Simulated seconds since start."""
        return self.model.now()

    def broker_configs(self, broker_id: int | str) -> dict[str, str]:
        """Dynamic configs set on a broker ("" = cluster default).

        :param broker_id: broker id, or "" for the cluster-wide default
        """
        return self._dynamic_configs(4, str(broker_id), (2, 3) if broker_id != "" else (3,))

    def topic_configs(self, topic: str) -> dict[str, str]:
        """Dynamic configs set on a topic.

        :param topic: topic name
        """
        return self._dynamic_configs(2, topic, (1,))

    def _dynamic_configs(self, rtype: int, name: str, sources: tuple[int, ...]) -> dict[str, str]:
        fn = getattr(self.model, "broker_configs" if rtype == 4 else "topic_configs", None)
        with self.model.lock:
            if fn is not None:
                return dict(fn(int(name) if rtype == 4 and name else name))
            code, msg, entries = self.model.describe_configs(rtype, name, None)
            if code != 0:
                raise KeyError(msg or name)
            # Only values set on this very resource (not inherited defaults).
            own = sources[:1] if rtype == 4 and name else sources
            return {e.name: e.value for e in entries if e.source in own and e.value is not None}

    def wait_for(self, predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> bool:
        """Poll ``predicate()`` until true or timeout (wall seconds); returns the last result.

        :param predicate: zero-argument callable
        :param timeout: wall-clock seconds
        :param interval: poll interval
        """
        deadline = time.monotonic() + timeout
        while True:
            ok = predicate()
            if ok or time.monotonic() >= deadline:
                return bool(ok)
            time.sleep(interval)
