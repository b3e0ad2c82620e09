"""Record every Kafka request kafka-python sends: (api_key, api_version), and what came back.

Wraps :meth:`kafka.net.connection.KafkaConnection._send_request`, the one method every
request of every kafka-python connection goes through (ApiVersions and SASL included), so
the versions are the ones really put on the wire after kafka-python's negotiation, not the
ones we expect it to pick. Nothing is faked: the request still goes to the broker.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35


@dataclass(frozen=True)
class Sent:
    """One request as written to a connection."""

    api_key: int
    api_version: int
    name: str
    node_id: Any


@dataclass
class ApiRecorder:
    """What was sent, what came back with an error code, and what brokers advertised.

    :param sent: every request in send order
    :param error_codes: (api_key, api_version, path, code) of every non-zero error code in a response
    :param failures: (api_key, api_version, exception text) of requests answered by no response
    :param advertised: broker ranges from the ApiVersions responses seen: node -> key -> (min, max)
    """

    sent: list[Sent] = field(default_factory=list)
    error_codes: list[tuple[int, int, str, int]] = field(default_factory=list)
    failures: list[tuple[int, int, str]] = field(default_factory=list)
    advertised: dict[Any, dict[int, tuple[int, int]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def pairs(self) -> set[tuple[int, int]]:
        """The distinct (api_key, api_version) pairs sent."""
        return {(s.api_key, s.api_version) for s in self.sent}

    def names(self) -> dict[int, str]:
        """API key -> kafka-python's name of the request (e.g. ``MetadataRequest``)."""
        return {s.api_key: s.name for s in self.sent}

    def unsupported(self) -> list[tuple[int, int, str, int]]:
        """Responses that carried UNSUPPORTED_VERSION anywhere in them."""
        return [e for e in self.error_codes if e[3] == UNSUPPORTED_VERSION]

    def _on_sent(self, conn: Any, request: Any, future: Any) -> None:
        key, version = int(request.API_KEY), request.API_VERSION
        if version is None:  # kafka-python refused to pick one (IncompatibleBrokerVersion)
            return
        if future.failed():
            return  # failed before a byte was written (connection closed, deadline passed)
        with self._lock:
            self.sent.append(Sent(key, int(version), type(request).__name__, conn.node_id))
        future.add_callback(self._on_response, conn.node_id, key, int(version))
        future.add_errback(self._on_failure, key, int(version))

    def _on_response(self, node_id: Any, key: int, version: int, response: Any) -> None:
        if response is None:  # a request that expects no response
            return
        data = response.to_dict()
        codes = list(_error_codes(data, ""))
        with self._lock:
            self.error_codes += [(key, version, path, code) for path, code in codes]
            # Only a successful ApiVersions answer lists the full ranges (the v0 fallback names its own key only).
            if key == API_VERSIONS_KEY and not data.get("error_code"):
                self.advertised[node_id] = {int(k["api_key"]): (int(k["min_version"]), int(k["max_version"]))
                                            for k in data.get("api_keys", [])}

    def _on_failure(self, key: int, version: int, exc: BaseException) -> None:
        with self._lock:
            self.failures.append((key, version, f"{type(exc).__name__}: {exc}"))


def _error_codes(node: Any, path: str) -> Iterator[tuple[str, int]]:
    """Every non-zero ``*error_code`` field of a response dict, with where it sits."""
    if isinstance(node, dict):
        for k, v in node.items():
            here = f"{path}.{k}" if path else str(k)
            if k.endswith("error_code") and isinstance(v, int) and v != 0:
                yield here, v
            else:
                yield from _error_codes(v, here)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _error_codes(v, f"{path}[{i}]")


class recording:
    """Context manager: record every request kafka-python sends while inside.

    ``with recording() as rec: ...`` then read ``rec.sent``. Not re-entrant; restores the
    original method on exit even when the body raised.

    :param client_id: only connections of clients with this client id (e.g. the tool's
        ``kafka-reassign``), so a test's own set-up clients are left out; None = all
    """

    def __init__(self, client_id: str | None = None) -> None:
        self.recorder = ApiRecorder()
        self.client_id = client_id
        self._original: Any = None

    def __enter__(self) -> ApiRecorder:
        from kafka.net.connection import KafkaConnection
        original = self._original = KafkaConnection._send_request
        recorder, client_id = self.recorder, self.client_id

        def send_and_record(conn: Any, request: Any, future: Any = None, timeout_at: Any = None) -> Any:
            out = original(conn, request, future=future, timeout_at=timeout_at)
            # The version is chosen inside _send_request (from the broker's ApiVersions): read it after.
            if client_id is None or conn.config.get("client_id") == client_id:
                recorder._on_sent(conn, request, out)
            return out

        KafkaConnection._send_request = send_and_record
        return recorder

    def __exit__(self, *exc: object) -> None:
        from kafka.net.connection import KafkaConnection
        KafkaConnection._send_request = self._original
