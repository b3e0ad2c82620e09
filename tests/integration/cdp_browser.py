"""Headless Chromium driven over the DevTools protocol, for tests that click (the command-line
``--dump-dom`` / ``--screenshot`` runs of test_ui_plugin.py cannot)."""
from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from airflow_stack import free_port


class Browser:
    """One headless Chromium with one page; ``with Browser(chromium, tmp) as b: b.open(url)``.

    :param executable: the chromium binary
    :param profile: a fresh directory for its profile
    """

    def __init__(self, executable: str, profile: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
             "--window-size=1400,1000", f"--user-data-dir={profile}", f"--remote-debugging-port={self.port}",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        self._ws: Any = None
        self._open = contextlib.ExitStack()

    def __enter__(self) -> "Browser":
        from websockets.sync.client import connect

        try:
            page = self._wait(self._page_target, 30, "the DevTools endpoint")
            self._ws = self._open.enter_context(connect(page["webSocketDebuggerUrl"], max_size=None))
        except BaseException:
            self.__exit__()  # no browser left behind
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._open.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def _page_target(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=2) as resp:
                targets = json.loads(resp.read())
        except OSError:
            return None
        return next((t for t in targets if t.get("type") == "page"), None)

    @staticmethod
    def _wait(found: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = found()
            if value:
                return value
            time.sleep(0.2)
        raise TimeoutError(f"timed out waiting for {what}")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events in between are skipped)."""
        call_id = next(self._ids)
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv(timeout=30))
            if msg.get("id") == call_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def wait_js(self, expression: str, timeout: float = 30.0) -> Any:
        """Wait until the expression is truthy in the page; its value."""
        return self._wait(lambda: self.js(expression), timeout, expression)

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) in the middle of the visible element."""
        box = self.wait_js(f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
            if (!e || e.offsetParent === null || e.disabled) return null;
            const r = e.getBoundingClientRect(); return {{x: r.x + r.width / 2, y: r.y + r.height / 2}}; }})()""")
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"], button="left", clickCount=1)
