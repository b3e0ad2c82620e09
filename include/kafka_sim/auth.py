"""Listener security of the simulated brokers: TLS, SASL PLAIN and SCRAM-SHA-256/512.

Follows apache/kafka's server side:

* ``clients/src/main/java/org/apache/kafka/common/security/authenticator/SaslServerAuthenticator.java``:
  before authentication a SASL listener answers only ApiVersions and SaslHandshake; any other
  request closes the connection. A handshake naming a mechanism that is not enabled gets
  UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection is closed. After a
  v1 handshake every token travels in a SaslAuthenticate request; a failed exchange is answered
  with SASL_AUTHENTICATION_FAILED and a message that never says whether the user exists, then
  the connection is closed. (Handshake v0, raw unframed tokens of pre-1.0 clients, is not offered.)
* ``.../security/plain/internals/PlainSaslServer.java``: ``[authzid] NUL user NUL password``;
  an authorization id other than the user is refused.
* ``.../security/scram/internals/ScramSaslServer.java`` and ``ScramFormatter.java``: SCRAM per
  RFC 5802 with the hashes of RFC 7677 (SHA-256) and SHA-512, no channel binding (``n,,``),
  iterations at least 4096, user names with ``=2C``/``=3D`` escapes.
* Requests 17 and 36 on a listener that is not SASL answer ILLEGAL_SASL_STATE (Kafka's
  KafkaApis does so once a connection is authenticated).

The server calls :meth:`ConnectionAuth.intercept` for each request frame of a connection before
its normal processing, and wraps its listeners with :attr:`ListenerSecurity.ssl_context`.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import ssl
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

from kafka_sim.apiversions import SASL_API_RANGES
from kafka_sim.connection import CLOSE

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 34, 33, 58
SCRAM_HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_PREFIX = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")


def server_ssl_context(certfile: str, keyfile: str, cafile: str | None = None,
                       require_client_cert: bool = False) -> ssl.SSLContext:
    """A TLS server context for the listeners (``ssl.client.auth=required`` with a CA file).

    :param certfile: PEM server certificate (chain)
    :param keyfile: PEM private key
    :param cafile: CA that signs client certificates
    :param require_client_cert: refuse clients without a certificate signed by ``cafile``
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(certfile, keyfile)
    if cafile:
        ctx.load_verify_locations(cafile)
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


@dataclass(frozen=True)
class ScramCredential:
    """What a broker stores per user and mechanism (never the password)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def create(cls, mechanism: str, password: str, iterations: int = 4096, salt: bytes | None = None) -> ScramCredential:
        h = SCRAM_HASHES[mechanism]
        salt = salt or os.urandom(24)
        salted = hashlib.pbkdf2_hmac(h().name, password.encode("utf-8"), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", h).digest()
        return cls(salt, iterations, h(client_key).digest(), hmac.new(salted, b"Server Key", h).digest())


@dataclass
class ListenerSecurity:
    """Security of every listener of a simulated cluster.

    :param protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    :param users: user name -> password (PLAIN checks it; SCRAM credentials are derived from it)
    :param mechanisms: enabled SASL mechanisms (``sasl.enabled.mechanisms``)
    :param ssl_context: server TLS context, required for SSL and SASL_SSL
    :param scram_iterations: PBKDF2 iterations of the stored SCRAM credentials
    """

    protocol: str = "PLAINTEXT"
    users: Mapping[str, str] = field(default_factory=dict)
    mechanisms: tuple[str, ...] = MECHANISMS
    ssl_context: ssl.SSLContext | None = None
    scram_iterations: int = 4096
    scram: dict[tuple[str, str], ScramCredential] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.protocol = self.protocol.upper()
        if self.protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"unknown security protocol {self.protocol!r}")
        if self.protocol.endswith("SSL") and self.ssl_context is None:
            raise ValueError(f"{self.protocol} needs an ssl_context (see server_ssl_context)")
        unknown = set(self.mechanisms) - set(MECHANISMS)
        if unknown:
            raise ValueError(f"the simulator does not speak SASL mechanism(s) {sorted(unknown)}")
        if self.scram_iterations < 4096:
            raise ValueError("SCRAM iterations must be at least 4096 (Kafka's minimum)")
        for user, password in self.users.items():
            for mech in SCRAM_HASHES:
                self.scram[(mech, user)] = ScramCredential.create(mech, password, self.scram_iterations)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL")

    def install(self, runtime: Any) -> None:
        """Make a cluster runtime's listeners speak this security (call before they open).

        :param runtime: the :class:`kafka_sim.server.ClusterRuntime`
        """
        runtime.ssl_context = self.ssl_context

        async def hook(conn: Any, api_key: int, version: int, correlation_id: int, frame: bytes) -> Any:
            state = conn.attrs.get("auth")
            if state is None:
                state = conn.attrs["auth"] = ConnectionAuth(self)
            if conn.attrs.get("auth_closing"):
                return CLOSE
            reply = state.intercept(frame)
            if reply is None:
                return None
            if reply.close:
                # Kafka sends the failure response, then closes: close on the next frame (a
                # kafka-python or librdkafka client closes first on its own).
                conn.attrs["auth_closing"] = True
            return reply.data if reply.data is not None else CLOSE

        runtime.connection_hook = hook


class _Failed(Exception):
    """Authentication failed: the message goes to the client, then the connection closes."""


@dataclass
class Reply:
    """What :meth:`ConnectionAuth.intercept` decided for a request frame.

    :param data: framed response to send (None: nothing)
    :param close: close the connection after sending
    """

    data: bytes | None
    close: bool = False


class ConnectionAuth:
    """Authentication state of one connection (SaslServerAuthenticator's state machine)."""

    def __init__(self, security: ListenerSecurity) -> None:
        self.security = security
        self.authenticated = not security.sasl
        self.user: str | None = None
        self.mechanism: str | None = None
        self._scram: _ScramExchange | None = None

    def intercept(self, frame: bytes) -> Reply | None:
        """Handle a request frame that belongs to authentication; None = process it normally."""
        api_key, version, correlation_id = _PREFIX.unpack_from(frame, 0)
        if self.authenticated:
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return Reply(self._error_response(api_key, version, correlation_id, ILLEGAL_SASL_STATE,
                                                  "SASL is not expected on this connection"))
            return None
        if api_key == API_VERSIONS and self.mechanism is None:
            return None
        if api_key == SASL_HANDSHAKE and self.mechanism is None:
            return self._handshake(frame, version, correlation_id)
        if api_key == SASL_AUTHENTICATE and self.mechanism is not None:
            return self._authenticate(frame, version, correlation_id)
        # Unexpected Kafka request during SASL handshake/authentication: Kafka closes.
        return Reply(None, close=True)

    def _handshake(self, frame: bytes, version: int, correlation_id: int) -> Reply:
        from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

        lo, hi = SASL_API_RANGES[SASL_HANDSHAKE]
        if not lo <= version <= hi:
            return Reply(None, close=True)
        request = SaslHandshakeRequest.decode(frame, version=version, header=True)
        enabled = list(self.security.mechanisms)
        if request.mechanism not in enabled:
            resp = SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
            return Reply(_frame(correlation_id, resp, version), close=True)
        self.mechanism = request.mechanism
        resp = SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        return Reply(_frame(correlation_id, resp, version))

    def _authenticate(self, frame: bytes, version: int, correlation_id: int) -> Reply:
        from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

        request = SaslAuthenticateRequest.decode(frame, version=version, header=True)
        try:
            token = self._evaluate(bytes(request.auth_bytes or b""))
        except _Failed as exc:
            resp = SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc),
                                            auth_bytes=b"", session_lifetime_ms=0)
            return Reply(_frame(correlation_id, resp, version), close=True)
        resp = SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=token, session_lifetime_ms=0)
        return Reply(_frame(correlation_id, resp, version))

    def _evaluate(self, token: bytes) -> bytes:
        if self.mechanism == "PLAIN":
            self._plain(token)
            return b""
        if self._scram is None:
            self._scram = _ScramExchange(self.security, str(self.mechanism))
            return self._scram.first(token)
        out = self._scram.final(token)
        self.authenticated, self.user = True, self._scram.user
        return out

    def _plain(self, token: bytes) -> None:
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise _Failed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user, password = (p.decode("utf-8", "replace") for p in parts)
        if not user or not password:
            raise _Failed("Authentication failed: username or password not specified")
        if authzid and authzid != user:
            raise _Failed("Authentication failed: Client requested an authorization id that is different from username")
        expected = self.security.users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise _Failed("Authentication failed: Invalid username or password")
        self.authenticated, self.user = True, user


def _frame(correlation_id: int, response: Any, version: int) -> bytes:
    body = response.encode(version=version)
    header = _INT32.pack(correlation_id) + (b"\x00" if response.flexible_version_q(version) else b"")
    return _INT32.pack(len(header) + len(body)) + header + bytes(body)


def _attrs(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


class _ScramExchange:
    """The server side of one SCRAM exchange (RFC 5802 section 5)."""

    def __init__(self, security: ListenerSecurity, mechanism: str) -> None:
        self.security, self.mechanism = security, mechanism
        self.hash = SCRAM_HASHES[mechanism]
        self.user: str | None = None
        self._client_first_bare = self._server_first = ""
        self._nonce = ""
        self._cred: ScramCredential | None = None

    def _invalid(self) -> _Failed:
        return _Failed("Authentication failed during authentication due to invalid credentials with SASL "
                       f"mechanism {self.mechanism}")

    def first(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        gs2, sep, bare = text.partition(",")  # "n,,n=user,r=nonce": gs2 header "n," + empty authzid
        if gs2 != "n" or not sep or not bare.startswith(","):
            raise _Failed("Invalid SCRAM client first message: channel binding is not supported")
        bare = bare[1:]
        attrs = _attrs(bare)
        if "n" not in attrs or "r" not in attrs:
            raise _Failed("Invalid SCRAM client first message")
        self.user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
        self._cred = self.security.scram.get((self.mechanism, self.user))
        if self._cred is None:
            raise self._invalid()
        self._client_first_bare = bare
        self._nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(self._cred.salt).decode()},"
                              f"i={self._cred.iterations}")
        return self._server_first.encode()

    def final(self, token: bytes) -> bytes:
        text = token.decode("utf-8", "replace")
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        attrs = _attrs(without_proof)
        if not sep or attrs.get("r") != self._nonce or attrs.get("c") != "biws":
            raise self._invalid()
        assert self._cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = hmac.new(self._cred.stored_key, auth_message, self.hash).digest()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise self._invalid() from None
        if len(proof) != len(signature):
            raise self._invalid()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(self.hash(client_key).digest(), self._cred.stored_key):
            raise self._invalid()
        server_signature = hmac.new(self._cred.server_key, auth_message, self.hash).digest()
        return b"v=" + base64.b64encode(server_signature)
