"""Kafka client security settings -> kafka-python ``KafkaAdminClient`` keyword arguments.

One mapping for both ways users describe a cluster:

* the Airflow Kafka provider connection's extra, a librdkafka config dict
  (``security.protocol``, ``sasl.mechanism``, ``ssl.ca.location``, ``ssl.key.pem``, ``oauth_cb`` ...);
* Java client properties as given to ``kafka-*.sh --command-config`` (``sasl.jaas.config``,
  ``ssl.truststore.location`` ...), read by the CLI.

Every security setting is either mapped or refused here, before any connection is made, with
an error naming the key: a setting that is silently dropped would connect with less security
than the user asked for, or fail later with an SSL error nobody can read.

Mechanisms: PLAIN, SCRAM-SHA-256/512, GSSAPI (needs the ``gssapi`` package and a Kerberos
ticket), OAUTHBEARER (a token callable named in ``oauth_cb``, the Kafka provider's
convention, or Amazon MSK IAM through ``aws-msk-iam-sasl-signer-python``), and TLS with
files, inline PEM (written to private temporary files) or a PKCS#12 keystore.
"""
from __future__ import annotations

import atexit
import hashlib
import importlib
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER", "AWS_MSK_IAM")
#: Keys whose values are secrets (registered with a log masker by callers).
SECRET_KEYS = frozenset({"sasl.password", "ssl.key.password", "ssl.key.pem", "ssl.keystore.password",
                         "ssl.keystore.key", "ssl.truststore.password", "sasl.oauthbearer.client.secret",
                         "sasl.jaas.config"})

# Amazon MSK bootstrap names carry the region: b-1.x.y.c2.kafka.eu-west-1.amazonaws.com:9098
# (serverless: boot-x.c2.kafka-serverless.<region>.amazonaws.com); China regions end in .com.cn.
MSK_HOST_RE = re.compile(r"\.kafka(?:-serverless)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?(?::\d+)?$", re.I)
_JAAS_RE = re.compile(r'(\w+)\s*=\s*"([^"]*)"')

_DIRECT = {"client.id": "client_id", "sasl.kerberos.service.name": "sasl_kerberos_service_name",
           "ssl.key.password": "ssl_password"}
_FILES = {"ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
          "ssl.key.location": "ssl_keyfile", "ssl.crl.location": "ssl_crlfile"}
_INLINE_PEM = {"ssl.ca.pem": "ssl_cafile", "ssl.certificate.pem": "ssl_certfile", "ssl.key.pem": "ssl_keyfile",
               # Java client names of the same inline PEM values (KIP-651)
               "ssl.truststore.certificates": "ssl_cafile", "ssl.keystore.certificate.chain": "ssl_certfile",
               "ssl.keystore.key": "ssl_keyfile"}
_INTS = {"request.timeout.ms": "request_timeout_ms", "socket.timeout.ms": "request_timeout_ms",
         "reconnect.backoff.ms": "reconnect_backoff_ms", "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
         "retry.backoff.ms": "retry_backoff_ms", "metadata.max.age.ms": "metadata_max_age_ms",
         "connections.max.idle.ms": "connections_max_idle_ms"}
# Security keys read by the functions below (not by the tables above).
_HANDLED = frozenset({"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
                      "sasl.jaas.config", "oauth_cb", "sasl.oauthbearer.config", "sasl.oauthbearer.method",
                      "ssl.endpoint.identification.algorithm", "enable.ssl.certificate.verification",
                      "ssl.cipher.suites", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type",
                      "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
                      "sasl.kerberos.principal", "sasl.kerberos.keytab", "sasl.kerberos.kinit.cmd",
                      "bootstrap.servers", "metadata.broker.list"})
# Security keys with no effect on an admin client's connection (tuning of librdkafka itself).
_HARMLESS = frozenset({"sasl.kerberos.min.time.before.relogin", "ssl.engine.location", "ssl.enabled.protocols",
                       "ssl.protocol", "ssl_engine_callback_data", "ssl.ca.certificate.stores",
                       "sasl.oauthbearer.extensions", "ssl.sigalgs.list", "ssl.curves.list"})


class AuthConfigError(ValueError):
    """A security setting that cannot be used; the message names the key and what to do."""


def servers_list(value: Any) -> list[str]:
    """``"b1:9092, b2:9092"`` or a list -> ``["b1:9092", "b2:9092"]``."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    return [str(s).strip() for s in items if str(s).strip()]


def client_kwargs(config: Mapping[str, Any], *, callback_allowlist: Iterable[str] | None = (),
                  strict: bool = False, check_files: bool = True) -> dict[str, Any]:
    """Map a librdkafka config dict or Java client properties to KafkaAdminClient kwargs.

    :param config: e.g. ``{"bootstrap.servers": "b1:9093", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "ops", "sasl.password": "..."}``
    :param callback_allowlist: dotted paths ``oauth_cb`` may name (the Kafka provider's
        ``[apache_kafka] callback_allowlist``); None allows any (the CLI: the user's own file)
    :param strict: refuse every key not understood (CLI properties); otherwise only unknown
        ``ssl.*``/``sasl.*`` keys are refused and client tuning keys (group.id...) are ignored
    :param check_files: refuse certificate/key files that do not exist here
    :raises AuthConfigError: naming the key that cannot be used
    """
    cfg = {str(k).strip(): v for k, v in config.items() if v is not None and v != ""}
    _refuse_unknown(cfg, strict)
    kwargs: dict[str, Any] = {}
    servers = cfg.get("bootstrap.servers") or cfg.get("metadata.broker.list")
    if servers:
        kwargs["bootstrap_servers"] = servers_list(servers)
    for key, kw in _DIRECT.items():
        if key in cfg:
            kwargs[kw] = str(cfg[key])
    for key, kw in _INTS.items():
        if key in cfg:
            kwargs[kw] = _int(cfg, key)
    protocol = str(cfg.get("security.protocol", "PLAINTEXT")).strip().upper()
    if protocol not in PROTOCOLS:
        raise AuthConfigError(f"security.protocol {cfg['security.protocol']!r} is not one of {', '.join(PROTOCOLS)}")
    if "security.protocol" in cfg:
        kwargs["security_protocol"] = protocol
    if protocol.startswith("SASL"):
        kwargs.update(_sasl_kwargs(cfg, protocol, kwargs.get("bootstrap_servers", []), callback_allowlist))
    elif cfg.get("sasl.mechanism") or cfg.get("sasl.mechanisms"):
        raise AuthConfigError(f"sasl.mechanism is set but security.protocol is {protocol}: "
                              "use SASL_SSL (or SASL_PLAINTEXT) for SASL to be used")
    if protocol.endswith("SSL"):
        kwargs.update(_ssl_kwargs(cfg, check_files))
    elif any(k in cfg for k in (*_FILES, *_INLINE_PEM, "ssl.keystore.location", "ssl.truststore.location")):
        raise AuthConfigError(f"TLS certificates are set but security.protocol is {protocol}: "
                              "use SSL or SASL_SSL for them to be used")
    return kwargs


def _int(cfg: Mapping[str, Any], key: str) -> int:
    try:
        return int(cfg[key])
    except (TypeError, ValueError):
        raise AuthConfigError(f"{key} must be an integer, got {cfg[key]!r}") from None


def _refuse_unknown(cfg: Mapping[str, Any], strict: bool) -> None:
    known = _HANDLED | _HARMLESS | set(_DIRECT) | set(_FILES) | set(_INLINE_PEM) | set(_INTS)
    for key in sorted(cfg):
        if key in known:
            continue
        if strict or key.startswith(("ssl.", "sasl.", "ssl_", "sasl_")):
            raise AuthConfigError(f"{key!r} is not supported by kafka-reassign's Kafka client (kafka-python); "
                                  "remove it or ask for it to be mapped - it is never ignored silently")


# -- SASL ---------------------------------------------------------------------------------

def _sasl_kwargs(cfg: Mapping[str, Any], protocol: str, servers: list[str],
                 allowlist: Iterable[str] | None) -> dict[str, Any]:
    raw = cfg.get("sasl.mechanism") or cfg.get("sasl.mechanisms") or "GSSAPI"  # librdkafka's default
    mechanism = str(raw).split(",")[0].strip().upper()
    if mechanism not in MECHANISMS:
        raise AuthConfigError(f"sasl.mechanism {raw!r} is not one of {', '.join(MECHANISMS)}")
    jaas = dict(_JAAS_RE.findall(str(cfg.get("sasl.jaas.config", ""))))
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        user = cfg.get("sasl.username") or jaas.get("username")
        password = cfg.get("sasl.password") or jaas.get("password")
        if not user or not password:
            raise AuthConfigError(f"sasl.mechanism {mechanism} needs sasl.username and sasl.password "
                                  "(or username/password in sasl.jaas.config)")
        return {"sasl_mechanism": mechanism, "sasl_plain_username": str(user), "sasl_plain_password": str(password)}
    if mechanism == "GSSAPI":
        return _gssapi_kwargs(cfg, jaas)
    if mechanism == "AWS_MSK_IAM" or (not cfg.get("oauth_cb") and msk_region(servers)):
        if protocol != "SASL_SSL":
            raise AuthConfigError("Amazon MSK IAM authentication needs security.protocol SASL_SSL")
        return {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": MskIamTokenProvider(_msk_region_or_env(servers))}
    return {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": _oauth_provider(cfg, allowlist)}


def _gssapi_kwargs(cfg: Mapping[str, Any], jaas: Mapping[str, str]) -> dict[str, Any]:
    if cfg.get("sasl.kerberos.keytab") or cfg.get("sasl.kerberos.kinit.cmd") or jaas.get("keyTab"):
        # librdkafka runs kinit itself; kafka-python uses the process's Kerberos credentials.
        raise AuthConfigError("sasl.kerberos.keytab / kinit.cmd: kafka-python does not run kinit. Get a ticket "
                              "for the worker instead (Airflow's `airflow kerberos` ticket renewer, or "
                              "KRB5_CLIENT_KTNAME=<keytab> in the worker's environment) and remove the keytab key")
    try:
        importlib.import_module("gssapi")
    except (ImportError, OSError):
        raise AuthConfigError("sasl.mechanism GSSAPI needs the Python package 'gssapi' (pip install gssapi; "
                              "it needs the Kerberos libraries, e.g. Debian libkrb5-dev)") from None
    service = cfg.get("sasl.kerberos.service.name") or jaas.get("serviceName") or "kafka"
    # sasl.kerberos.principal names the *client* (who kinit logs in as): the ticket cache decides it here.
    return {"sasl_mechanism": "GSSAPI", "sasl_kerberos_service_name": str(service)}


def msk_region(servers: Iterable[str]) -> str | None:
    """The AWS region of an Amazon MSK bootstrap address, or None when it is not one."""
    for server in servers:
        m = MSK_HOST_RE.search(server.strip())
        if m:
            return m.group("region").lower()
    return None


def _msk_region_or_env(servers: list[str]) -> str:
    region = msk_region(servers) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region:
        raise AuthConfigError("AWS_MSK_IAM: the bootstrap servers are not MSK names and AWS_REGION is not set: "
                              "cannot tell which region to sign for")
    try:
        importlib.import_module("aws_msk_iam_sasl_signer")
    except ImportError:
        raise AuthConfigError("Amazon MSK IAM needs the package aws-msk-iam-sasl-signer-python") from None
    return region


class _CachingTokenProvider:
    """Base of our kafka-python token providers: one token reused until a minute before expiry."""

    margin_seconds = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires = 0.0

    def fetch(self) -> tuple[str, float]:  # pragma: no cover - overridden
        raise NotImplementedError

    def token(self) -> str:
        with self._lock:
            if self._token is None or time.time() >= self._expires - self.margin_seconds:
                self._token, self._expires = self.fetch()
            return self._token

    def extensions(self) -> dict[str, str]:
        return {}


def _token_provider_class() -> type:
    """Our provider registered as kafka-python's AbstractTokenProvider (kafka imported lazily)."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    AbstractTokenProvider.register(_CachingTokenProvider)
    return _CachingTokenProvider


class MskIamTokenProvider(_CachingTokenProvider):
    """OAUTHBEARER tokens for Amazon MSK IAM, signed with the worker's AWS credentials.

    :param region: AWS region of the cluster
    """

    def __init__(self, region: str) -> None:
        _token_provider_class()
        super().__init__()
        self.region = region

    def fetch(self) -> tuple[str, float]:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

        token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(self.region)
        return token, expiry_ms / 1000.0

    def __repr__(self) -> str:
        return f"MskIamTokenProvider(region={self.region!r})"


class CallbackTokenProvider(_CachingTokenProvider):
    """OAUTHBEARER tokens from a confluent-kafka style ``oauth_cb(config_str) -> (token, expiry)``.

    :param callback: the callable; it may also return ``(token, expiry, principal, extensions)``
    :param config_str: the connection's ``sasl.oauthbearer.config``, passed to the callback
    :param name: the dotted path, for messages
    """

    def __init__(self, callback: Callable[[str], Any], config_str: str = "", name: str = "") -> None:
        _token_provider_class()
        super().__init__()
        self.callback, self.config_str, self.name = callback, config_str, name
        self._extensions: dict[str, str] = {}

    def fetch(self) -> tuple[str, float]:
        result = self.callback(self.config_str)
        if not isinstance(result, (tuple, list)) or len(result) < 2:
            raise AuthConfigError(f"oauth_cb {self.name} must return (token, expiry_seconds), got {type(result).__name__}")
        if len(result) >= 4 and result[3]:
            self._extensions = {str(k): str(v) for k, v in dict(result[3]).items()}
        return str(result[0]), float(result[1])

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def __repr__(self) -> str:
        return f"CallbackTokenProvider({self.name})"


def _oauth_provider(cfg: Mapping[str, Any], allowlist: Iterable[str] | None) -> CallbackTokenProvider:
    if str(cfg.get("sasl.oauthbearer.method", "default")).lower() == "oidc":
        raise AuthConfigError("sasl.oauthbearer.method oidc is not supported: name a token callable in oauth_cb "
                              "(it can call your identity provider's token endpoint)")
    path = cfg.get("oauth_cb")
    if not path:
        raise AuthConfigError("sasl.mechanism OAUTHBEARER needs a token source: 'oauth_cb' naming a callable "
                              "(my_pkg.auth.oauth_cb, returning (token, expiry_seconds)) or an Amazon MSK bootstrap")
    if callable(path):
        return CallbackTokenProvider(path, str(cfg.get("sasl.oauthbearer.config", "")), getattr(path, "__name__", "oauth_cb"))
    path = str(path)
    if allowlist is not None and path not in set(allowlist):
        raise AuthConfigError(f"oauth_cb {path!r} is not in [apache_kafka] callback_allowlist: add its full dotted "
                              "path there to trust it")
    module, _, attr = path.rpartition(".")
    try:
        callback = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise AuthConfigError(f"oauth_cb {path!r} cannot be imported: {exc}") from None
    return CallbackTokenProvider(callback, str(cfg.get("sasl.oauthbearer.config", "")), path)


# -- TLS ----------------------------------------------------------------------------------

def _ssl_kwargs(cfg: Mapping[str, Any], check_files: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, kw in _FILES.items():
        if key in cfg and not (key == "ssl.ca.location" and str(cfg[key]).lower() == "probe"):
            out[kw] = _existing(key, str(cfg[key]), check_files)
    for key, kw in _INLINE_PEM.items():
        if key in cfg:
            if kw in out:
                raise AuthConfigError(f"{key} and a file for the same certificate are both set: keep one")
            out[kw] = str(private_pem_file(str(cfg[key]), key))
    out.update(_truststore(cfg, check_files, out))
    out.update(_keystore(cfg, check_files, out))
    if "ssl_keyfile" in out and "ssl_certfile" not in out:
        raise AuthConfigError("a TLS client key is set without its certificate (ssl.certificate.location or .pem)")
    algo = cfg.get("ssl.endpoint.identification.algorithm")
    if algo is not None:
        # librdkafka: "https" checks the broker's name against its certificate, "none" does not.
        out["ssl_check_hostname"] = str(algo).strip().lower() == "https"
    verify = str(cfg.get("enable.ssl.certificate.verification", "true")).strip().lower() != "false"
    if not verify or cfg.get("ssl.cipher.suites") or (out.get("ssl_cafile") and Path(out["ssl_cafile"]).is_dir()):
        out = {"ssl_context": _ssl_context(out, verify, cfg.get("ssl.cipher.suites")),
               **({"ssl_check_hostname": False} if not verify else {})}
    return out


def _existing(key: str, path: str, check: bool) -> str:
    if check and not Path(path).exists():
        raise AuthConfigError(f"{key} {path}: no such file on this machine")
    return path


def _truststore(cfg: Mapping[str, Any], check: bool, have: Mapping[str, Any]) -> dict[str, Any]:
    path = cfg.get("ssl.truststore.location")
    if not path:
        return {}
    kind = str(cfg.get("ssl.truststore.type", "JKS")).upper()
    if "ssl_cafile" in have:
        raise AuthConfigError("ssl.truststore.location and a CA file are both set: keep one")
    if kind == "PEM":
        return {"ssl_cafile": _existing("ssl.truststore.location", str(path), check)}
    if kind == "PKCS12":
        certs, _ = _load_p12("ssl.truststore.location", str(path), cfg.get("ssl.truststore.password"))
        return {"ssl_cafile": str(private_pem_file(certs, "ssl.truststore.location"))}
    raise AuthConfigError(f"ssl.truststore.type {kind} cannot be read by Python: convert it to PEM "
                          "(keytool -exportcert -rfc) and use ssl.ca.location")


def _keystore(cfg: Mapping[str, Any], check: bool, have: Mapping[str, Any]) -> dict[str, Any]:
    path = cfg.get("ssl.keystore.location")
    if not path:
        return {}
    kind = str(cfg.get("ssl.keystore.type", "PKCS12")).upper()  # librdkafka keystores are PKCS#12
    if "ssl_certfile" in have:
        raise AuthConfigError("ssl.keystore.location and a client certificate are both set: keep one")
    if kind != "PKCS12":
        raise AuthConfigError(f"ssl.keystore.type {kind} cannot be read by Python: convert it to PKCS12 or PEM")
    certs, key = _load_p12("ssl.keystore.location", str(path), cfg.get("ssl.keystore.password"))
    if not key:
        raise AuthConfigError(f"ssl.keystore.location {path} holds no private key")
    return {"ssl_certfile": str(private_pem_file(certs, "ssl.keystore.location")),
            "ssl_keyfile": str(private_pem_file(key, "ssl.keystore.location key"))}


def _load_p12(key: str, path: str, password: Any) -> tuple[str, str | None]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AuthConfigError(f"{key} {path}: {exc.strerror or exc}") from None
    try:
        pkey, cert, extra = pkcs12.load_key_and_certificates(data, str(password).encode() if password else None)
    except ValueError as exc:
        raise AuthConfigError(f"{key} {path}: not a PKCS#12 file or wrong password ({exc})") from None
    pem = serialization.Encoding.PEM
    certs = "".join(c.public_bytes(pem).decode() for c in ([cert] if cert else []) + list(extra or []))
    key_pem = pkey.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption()).decode() if pkey else None
    return certs, key_pem


def _ssl_context(files: Mapping[str, Any], verify: bool, ciphers: Any) -> Any:
    """An SSLContext for what kafka-python's own file options cannot say."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    cafile = files.get("ssl_cafile")
    if cafile and Path(cafile).is_dir():
        ctx.load_verify_locations(capath=cafile)
    elif cafile:
        ctx.load_verify_locations(cafile=cafile)
    else:
        ctx.load_default_certs()
    ctx.check_hostname = bool(files.get("ssl_check_hostname", True)) and verify
    if not verify:
        ctx.verify_mode = ssl.CERT_NONE
    if files.get("ssl_certfile"):
        ctx.load_cert_chain(files["ssl_certfile"], files.get("ssl_keyfile"), files.get("ssl_password"))
    if files.get("ssl_crlfile"):
        ctx.load_verify_locations(cafile=files["ssl_crlfile"])
        ctx.verify_flags |= ssl.VERIFY_CRL_CHECK_LEAF
    if ciphers:
        try:
            ctx.set_ciphers(str(ciphers))
        except ssl.SSLError:
            raise AuthConfigError(f"ssl.cipher.suites {ciphers!r}: no cipher OpenSSL knows") from None
    return ctx


_PEM_DIR: Path | None = None
_PEM_LOCK = threading.Lock()


def private_pem_file(pem: str, key: str) -> Path:
    """Write inline PEM to a file only this user can read; the same text reuses its file.

    The files live in one private directory (mode 0700) per process, removed at exit: a
    kafka-python client opens them each time it connects to a broker.

    :param pem: the PEM text
    :param key: the setting it came from, for messages
    """
    global _PEM_DIR
    text = pem.replace("\\n", "\n").strip() + "\n"  # single-line JSON often carries escaped newlines
    if "-----BEGIN " not in text:
        raise AuthConfigError(f"{key} is not PEM text (no -----BEGIN line)")
    with _PEM_LOCK:
        if _PEM_DIR is None or not _PEM_DIR.is_dir():
            _PEM_DIR = Path(tempfile.mkdtemp(prefix="kafka-reassign-tls-"))
            os.chmod(_PEM_DIR, 0o700)
            atexit.register(shutil.rmtree, _PEM_DIR, True)
        path = _PEM_DIR / (hashlib.sha256(text.encode()).hexdigest()[:24] + ".pem")
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(text)
    return path
