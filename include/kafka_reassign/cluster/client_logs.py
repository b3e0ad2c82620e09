"""How loud the Kafka client libraries are in task logs and CLI output.

kafka-python logs every connection, metadata refresh and coordinator lookup at INFO: in a small
run that was most of the task log. Our own lines tell the story (what will be done, each write,
progress, the result); the client's lines are kept for when the user asks for them.
"""
from __future__ import annotations

import logging
import re

#: Loggers of the Kafka client libraries we use.
CLIENT_LOGGERS = ("kafka", "aws_msk_iam_sasl_signer", "botocore", "urllib3")
DEFAULT_LEVEL = "WARNING"


def set_client_log_level(level: str | int | None = None) -> int:
    """Set the Kafka client libraries' log level (default WARNING); returns the level used.

    :param level: a level name (``INFO``, ``debug``) or number; None/empty = WARNING
    :raises ValueError: for a name that is not a logging level
    """
    if level in (None, ""):
        level = DEFAULT_LEVEL
    if isinstance(level, str):
        number = logging.getLevelName(level.strip().upper())
        if not isinstance(number, int):
            raise ValueError(f"kafka client log level {level!r} is not one of DEBUG, INFO, WARNING, ERROR")
        level = number
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(level)
    return int(level)


# Authentication and TLS failures kafka-python only logs (its bootstrap then times out).
_SECURITY_RE = re.compile(
    r"((?:SaslAuthenticationFailedError|UnsupportedSaslMechanismError|IllegalSaslStateError)[:\s]+[^()\n]*"
    r"|\[SSL: [A-Z_]+\][^()\n]*|certificate verify failed[^()\n]*)")


class SecurityErrors(logging.Handler):
    """Remembers the last authentication or TLS error kafka-python logged (``last``).

    Used while connecting: kafka-python retries a refused SASL login or TLS handshake until the
    bootstrap times out and then reports only the timeout; the user needs the broker's reason.
    """

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.last: str | None = None
        self._logger = logging.getLogger("kafka")

    def emit(self, record: logging.LogRecord) -> None:
        match = _SECURITY_RE.search(record.getMessage())
        if match:
            self.last = match.group(1).strip().rstrip(":;,")

    def __enter__(self) -> SecurityErrors:
        self._saved = (self._logger.level, self._logger.propagate)
        if self._logger.getEffectiveLevel() > logging.WARNING:
            # Silenced (the CLI without -v): listen anyway, but keep the records from the output.
            self._logger.setLevel(logging.WARNING)
            self._logger.propagate = False
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]
