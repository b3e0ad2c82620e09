"""The connection under :class:`~kafka_reassign.cluster.admin.KafkaAdmin`: connecting, retrying, errors.

Transient errors (timeouts, NOT_CONTROLLER, connection errors, anything kafka-python marks
``retriable``) are retried with tenacity (exponential back-off, bounded attempts and time);
permanent ones raise :class:`~kafka_reassign.errors.KafkaAdminError` carrying the Kafka error
name. The request methods live in the mixins built on :class:`AdminConnection`.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Self, TypeVar

from tenacity import (RetryError, Retrying, retry_if_exception, stop_after_attempt, stop_after_delay,
                      wait_exponential)

from kafka_reassign.cluster.metadata import BrokerNode, ClusterDescription
from kafka_reassign.errors import KafkaAdminError

if TYPE_CHECKING:
    from kafka.admin import KafkaAdminClient

# The parts of KafkaAdmin log under its name (what operators and tests filter on).
log = logging.getLogger("kafka_reassign.cluster.admin")
T = TypeVar("T")

#: Per-partition errors worth retrying (kafka-python marks UNKNOWN_TOPIC_OR_PARTITION retriable,
#: but for a reassignment of a partition that does not exist it is final).
TRANSIENT_PARTITION_ERRORS = frozenset({"REQUEST_TIMED_OUT", "NOT_CONTROLLER", "NETWORK_EXCEPTION",
                                        "THROTTLING_QUOTA_EXCEEDED", "LEADER_NOT_AVAILABLE"})
#: KIP-455 (Kafka 2.4+): without these no reassignment can be started, watched or cancelled.
KIP455_APIS = {45: "AlterPartitionReassignments", 46: "ListPartitionReassignments"}
#: Secret-bearing kwargs never logged.
SECRET_KWARGS = frozenset({"sasl_plain_password", "ssl_password", "sasl_oauth_token_provider", "ssl_context"})


def error_name(err: object) -> str:
    """Kafka's name for an error class or instance (``NOT_CONTROLLER``), else the class name."""
    cls = err if isinstance(err, type) else type(err)
    msg = getattr(cls, "message", None)
    if isinstance(msg, str) and msg and msg.upper() == msg:
        return msg
    return cls.__name__


def is_transient(exc: BaseException) -> bool:
    """Whether retrying may help: timeouts, connection problems, controller moves."""
    from kafka import errors as kerrors
    no_brokers = getattr(kerrors, "NoBrokersAvailable", None)  # gone in kafka-python 3
    if no_brokers is not None and isinstance(exc, no_brokers):
        return True
    if isinstance(exc, kerrors.KafkaError):
        return bool(getattr(exc, "retriable", False))
    if isinstance(exc, RuntimeError) and "controller" in str(exc).lower():
        return True  # kafka-python's "Failed to find active controller id!" after NOT_CONTROLLER twice
    return isinstance(exc, (OSError, TimeoutError, ConnectionError))


def redact(kwargs: Mapping[str, object]) -> dict[str, object]:
    """A copy of admin kwargs safe to log."""
    return {k: ("***" if k in SECRET_KWARGS and v is not None else v) for k, v in kwargs.items()}


class CallTimedOut(TimeoutError):
    """A kafka-python call that did not come back within the admin's call deadline (retried)."""


class UnsupportedClusterError(KafkaAdminError):
    """The brokers lack KIP-455 (Kafka older than 2.4): refused while connecting, before any write.

    ``str()`` is one line, what the CLI prints (exit 2).
    """

    def __init__(self, missing: Iterable[str]) -> None:
        super().__init__("ApiVersions", "UNSUPPORTED_VERSION",
                         f"this cluster's brokers do not support KIP-455 reassignments ({', '.join(missing)}, "
                         "Kafka 2.4+); nothing was written: upgrade the brokers to Kafka 2.4 or later")

    def __str__(self) -> str:
        return self.detail


class AdminConnection:
    """One connected KafkaAdminClient, with retries and Kafka error names.

    :param kwargs: kafka-python KafkaAdminClient kwargs (bootstrap_servers, security_protocol,
        sasl_mechanism, sasl_plain_username, sasl_plain_password, ssl_cafile, ssl_certfile,
        ssl_keyfile, ssl_password, ssl_check_hostname, request_timeout_ms, client_id, ...) plus
        ``retry_attempts`` (default 5), ``retry_max_seconds`` (default 60) and
        ``call_timeout_seconds``: how long one attempt may wait for kafka-python before the client
        is replaced (default the request timeout plus 5 s)
    """

    def __init__(self, *, retry_attempts: int = 5, retry_max_seconds: float = 60.0,
                 call_timeout_seconds: float | None = None, **kwargs: object) -> None:
        self.retry_attempts = int(retry_attempts)
        self.retry_max_seconds = float(retry_max_seconds)
        kwargs.setdefault("client_id", "kafka-reassign")
        kwargs.setdefault("bootstrap_timeout_ms", 10_000)
        kwargs.setdefault("request_timeout_ms", 30_000)
        # A sent request has kafka-python's own timer (request_timeout_ms); the deadline catches
        # what has none, a little later, leaving room in retry_max_seconds for another try.
        self.call_timeout_seconds = float(call_timeout_seconds if call_timeout_seconds is not None
                                          else int(kwargs["request_timeout_ms"]) / 1000 + 5)  # type: ignore[call-overload]
        self._closed = False
        # kafka-python backs off up to 30 s from a broker that refused connections: a broker
        # back from a restart would stay unreadable that long (its lag read as a stall).
        kwargs.setdefault("reconnect_backoff_max_ms", 1_000)
        self._kwargs = kwargs
        self._client: KafkaAdminClient | None = None
        log.debug("KafkaAdmin(%s)", redact(kwargs))
        # Bootstrapping already retries for bootstrap_timeout_ms; retrying that again only delays the error.
        self._client = self._retried("connect", self._connect, attempts=1)
        self._require_kip455()

    def _connect(self) -> "KafkaAdminClient":
        from kafka.admin import KafkaAdminClient
        from kafka.errors import KafkaError

        from kafka_reassign.cluster.client_logs import SecurityErrors
        with SecurityErrors() as refused:
            try:
                return KafkaAdminClient(**self._kwargs)
            except KafkaError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                where = f"cannot reach Kafka at {self._kwargs.get('bootstrap_servers')}"
                if refused.last:  # reachable, but the login or the TLS handshake was refused
                    raise KafkaAdminError("connect", error_name(exc), f"{where}: the brokers refused the "
                                          f"connection's credentials or TLS settings: {refused.last}") from exc
                raise KafkaAdminError("connect", error_name(exc), f"{where} within "
                                      f"{self._kwargs.get('bootstrap_timeout_ms')} ms: {exc}") from exc

    def _require_kip455(self) -> None:
        """Refuse a cluster without KIP-455 now, before any caller reads or writes.

        Reads the ApiVersions answer kafka-python got while bootstrapping: no extra request.
        """
        manager = getattr(self._client, "_manager", None)
        versions = getattr(getattr(manager, "broker_version_data", None), "api_versions", None)
        if versions is None:  # not known: the reassignment requests themselves will fail
            return
        missing = [name for key, name in KIP455_APIS.items() if key not in versions]
        if missing:
            self.close()
            raise UnsupportedClusterError(missing)

    def max_api_version(self, api_key: int) -> int | None:
        """The highest version of ``api_key`` the bootstrap broker supports (from the ApiVersions
        answer kafka-python already has), -1 when it lacks the API, None when not known."""
        manager = getattr(self._open, "_manager", None)
        versions = getattr(getattr(manager, "broker_version_data", None), "api_versions", None)
        if versions is None:
            return None
        found = versions.get(api_key)
        return int(found[1]) if found is not None else -1

    @property
    def _open(self) -> "KafkaAdminClient":
        """The client a request goes through (a closed KafkaAdmin sends none)."""
        if self._client is None and not self._closed:
            self._client = self._connect()  # the last one hung and was closed: connect again
        if self._client is None:
            raise KafkaAdminError("request", "CLOSED", "this KafkaAdmin is closed")
        return self._client

    @property
    def client(self) -> "KafkaAdminClient | None":
        """The underlying kafka-python KafkaAdminClient (for tests and diagnostics)."""
        return self._client

    def close(self) -> None:
        self._closed = True
        if self._client is not None:
            try:
                self._client.close()
            finally:
                self._client = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- retry wrapper ---------------------------------------------------------------
    def _retry_worthy(self, exc: BaseException) -> bool:
        """Transient errors, and a broker missing from the client's cached broker list.

        kafka-python keeps the broker list of its last metadata response for up to
        ``metadata_max_age_ms`` (5 min): a broker that restarted meanwhile is unknown to it
        and every request to it fails with UnknownBrokerIdError. Refresh and try again.
        """
        if type(exc).__name__ in ("UnknownBrokerIdError", "NodeNotReadyError", "KafkaConnectionError"):
            # The controller kafka-python remembers may be the broker that went away: find it again.
            if self._client is not None and getattr(self._client, "_controller_id", None) is not None:
                self._client._controller_id = None
        if type(exc).__name__ == "UnknownBrokerIdError":
            self.refresh_metadata()
            return True
        return is_transient(exc)

    def refresh_metadata(self) -> None:
        """Ask for a new broker list now (best effort: a failure leaves the old one)."""
        manager = getattr(self._client, "_manager", None)
        if manager is None:
            return
        try:
            self._within_deadline("metadata refresh", manager.run, (manager.cluster.refresh_metadata,), {})
        except Exception as exc:  # noqa: BLE001 - the retried call reports the real error
            log.debug("metadata refresh failed: %s", exc)

    def _call(self, operation: str, method: str, *args: object, attempts: int | None = None,
              **kwargs: object) -> Any:
        """Send one admin request, retried: ``method`` names the KafkaAdminClient method.

        It is looked up on the current client at each try, so a retry after a hung client was
        replaced goes through the new one.
        """
        def attempt() -> Any:
            return self._within_deadline(operation, getattr(self._open, method), args, kwargs)
        return self._retried(operation, attempt, attempts)

    def _retried(self, operation: str, attempt: Callable[[], T], attempts: int | None = None) -> T:
        retrying = Retrying(
            retry=retry_if_exception(self._retry_worthy),
            stop=stop_after_attempt(attempts or self.retry_attempts) | stop_after_delay(self.retry_max_seconds),
            wait=wait_exponential(multiplier=0.2, min=0.2, max=5.0),
            reraise=False,
            before_sleep=lambda rs: log.warning("%s: transient error (%s), retry %d", operation,
                                                rs.outcome and rs.outcome.exception(), rs.attempt_number),
        )
        try:
            return retrying(attempt)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            raise KafkaAdminError(operation, error_name(last),
                                  f"still failing after {exc.last_attempt.attempt_number} attempts: {last}") from last
        except KafkaAdminError:
            raise
        except Exception as exc:  # noqa: BLE001 - translate kafka-python errors, keep ours
            from kafka.errors import KafkaError
            if isinstance(exc, KafkaError) or isinstance(exc, (OSError, RuntimeError)):
                raise KafkaAdminError(operation, error_name(exc), str(exc)) from exc
            raise

    def _within_deadline(self, operation: str, fn: Callable[..., T], args: tuple, kwargs: dict) -> T:
        """Run ``fn`` but wait at most ``call_timeout_seconds`` for it.

        kafka-python 3 blocks the caller on an event with no timeout, and a request queued while
        its connection is still initialising has no timer of its own: a broker that stops
        answering then would hold a run (and its throttle) forever. Past the deadline the client
        is closed, which fails the stuck wait, and the attempt counts as a timeout to retry.
        """
        box: dict[str, object] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["value"] = fn(*args, **kwargs)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name=f"kafka-call-{operation}", daemon=True).start()
        if not done.wait(self.call_timeout_seconds):
            self._replace_hung_client(operation)
            raise CallTimedOut(f"{operation}: no answer within {self.call_timeout_seconds:.0f} s")
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["value"]  # type: ignore[return-value]

    def _replace_hung_client(self, operation: str) -> None:
        hung, self._client = self._client, None
        log.warning("%s: kafka-python gave no answer within %.0f s; closing its client, the next try "
                    "connects again", operation, self.call_timeout_seconds)
        if hung is not None:
            threading.Thread(target=hung.close, name="kafka-close-hung", daemon=True).start()

    def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller and every registered broker."""
        raw = self._call("DescribeCluster", "describe_cluster")
        brokers = tuple(BrokerNode(id=int(b["broker_id"]), host=str(b.get("host", "")), port=int(b.get("port", 0)),
                                   rack=b.get("rack"), fenced=bool(b.get("is_fenced", False)))
                        for b in raw.get("brokers", []))
        controller = raw.get("controller_id")
        return ClusterDescription(cluster_id=raw.get("cluster_id"),
                                  controller_id=int(controller) if controller is not None else None, brokers=brokers)
