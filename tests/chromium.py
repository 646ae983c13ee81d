"""Drive Debian's headless `chromium` through the DevTools protocol over a pipe.

    with Browser(tmp_path) as browser:
        page = browser.open("file:///tmp/report.html")
        page.evaluate("document.title")
        page.problems      # console errors, uncaught exceptions, CSP and loading errors
        page.screenshot(path, width=1280)

`--remote-debugging-pipe` speaks the protocol over file descriptors 3 (commands in) and 4
(replies and events out), NUL-terminated JSON: no port, no network, no client library. The
browser runs with a fresh profile and everything that would reach out (updates, sync,
QUIC, background networking) switched off.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--remote-debugging-pipe")
TIMEOUT_S = 60.0

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


class Browser:
    def __init__(self, profile_dir: Path):
        self.profile_dir = profile_dir
        self._next_id = 0
        self._events: list[dict] = []
        self._buffer = b""

    def __enter__(self) -> Browser:
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()

        def on_fds_3_and_4():
            os.dup2(commands_read, 3)
            os.dup2(replies_write, 4)

        self._process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile_dir}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=on_fds_3_and_4,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._replies)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def wait_for(self, method: str, session: str) -> dict:
        for index, event in enumerate(self._events):
            if event.get("method") == method and event.get("sessionId") == session:
                return self._events.pop(index)
        while True:
            event = self._receive()
            if event.get("method") == method and event.get("sessionId") == session:
                return event
            self._events.append(event)

    def open(self, url: str, width: int = 1280, height: int = 900) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=session)
        page = Page(self, session)
        page.resize(width, height)
        self.call("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        return page

    def _receive(self) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline or self._process.poll() is not None:
                raise RuntimeError("chromium stopped answering")
            chunk = os.read(self._replies, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str):
        result = self.browser.call("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True,
        }, self.session)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    @property
    def problems(self) -> list[str]:
        """Everything the page complained about: exceptions, console errors and warnings,
        and the browser's own log errors (a blocked request, a CSP violation)."""
        self.evaluate("0")  # lets the events that were already sent arrive
        found = []
        for event in self.browser._events:
            if event.get("sessionId") != self.session:
                continue
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                found.append(json.dumps(params["exceptionDetails"])[:500])
            elif event["method"] == "Runtime.consoleAPICalled" and params["type"] in ("error", "warning", "assert"):
                found.append(json.dumps(params["args"])[:500])
            elif event["method"] == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
                found.append(params["entry"]["text"][:500])
        return found

    def resize(self, width: int, height: int) -> None:
        self.browser.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False,
        }, self.session)

    def screenshot(self, path: Path, width: int = 1280, full_page: bool = True) -> None:
        if full_page:
            size = self.browser.call("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
            self.resize(width, int(size["height"]))
        shot = self.browser.call("Page.captureScreenshot", {"format": "png"}, self.session)
        path.write_bytes(base64.b64decode(shot["data"]))
