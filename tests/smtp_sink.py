"""A minimal SMTP server for tests: accepts every message and keeps it (RFC 5321 subset)."""
from __future__ import annotations

import email
import socketserver
import threading
from email.message import Message


class _Handler(socketserver.StreamRequestHandler):
    def _reply(self, line: str) -> None:
        self.wfile.write((line + "\r\n").encode())

    def handle(self) -> None:
        self._reply("220 sink ESMTP")
        while True:
            line = self.rfile.readline()
            if not line:
                return
            verb = line.decode(errors="replace").strip().split(" ", 1)[0].upper()
            if verb in ("EHLO", "HELO"):
                self._reply("250 sink")
            elif verb in ("MAIL", "RCPT", "RSET", "NOOP"):
                self._reply("250 OK")
            elif verb == "DATA":
                self._reply("354 end with <CRLF>.<CRLF>")
                data = []
                for raw in iter(self.rfile.readline, b""):
                    if raw in (b".\r\n", b".\n"):
                        break
                    data.append(raw[1:] if raw.startswith(b"..") else raw)
                self.server.messages.append(email.message_from_bytes(b"".join(data)))  # type: ignore[attr-defined]
                self._reply("250 queued")
            elif verb == "QUIT":
                self._reply("221 bye")
                return
            else:
                self._reply("502 not implemented")


class SmtpSink:
    """``with SmtpSink() as sink:`` -> ``sink.port``; received mails in ``sink.messages``."""

    def __init__(self) -> None:
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.messages: list[Message] = []  # type: ignore[attr-defined]
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def messages(self) -> list[Message]:
        return self.server.messages  # type: ignore[attr-defined]

    def __enter__(self) -> SmtpSink:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
