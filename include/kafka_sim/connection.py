"""The contract between a broker listener and a connection hook (e.g. :mod:`kafka_sim.auth`).

Kept below both the server and the hooks so that a hook never imports the server.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable


@dataclass
class Connection:
    """One client connection of one broker; hooks may keep per-connection state in ``attrs``."""

    broker_id: int
    peer: Any
    attrs: dict[str, Any] = field(default_factory=dict)


#: What a connection hook returns to drop the connection.
CLOSE = object()

#: A connection hook sees every decoded request prefix before the handlers do:
#: ``hook(conn, api_key, api_version, correlation_id, frame)`` returns None to let the
#: request through, framed response bytes to answer it itself, or CLOSE to drop the connection.
ConnectionHook = Callable[[Connection, int, int, int, bytes], Awaitable[Any]]
