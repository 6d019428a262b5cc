"""A real headless Chromium, driven through the DevTools protocol over a pipe (no extra package).

`open_page(path)` loads a local HTML file and returns what the browser saw: the title, the text
length, every image with its load state and natural size, console errors, uncaught exceptions,
failed requests and a screenshot. `find_chromium()` is None where no browser is installed (the
tests skip then, saying so).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--remote-debugging-pipe")


def find_chromium() -> str | None:
    """The path of a Chromium (or Chrome) binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageCheck:
    title: str
    text_length: int
    images: list[dict]
    console_errors: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    screenshot: bytes = b""


class _Pipe:
    """CDP messages: NUL-terminated JSON written to the browser's fd 3, read from its fd 4."""

    def __init__(self, write_fd: int, read_fd: int):
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 30) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            event = self._read(deadline)
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self, deadline: float) -> dict:
        import select

        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from the browser")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 16)
                if not chunk:
                    raise RuntimeError("the browser closed the pipe")
                self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)


_PAGE_STATE = """JSON.stringify({
  title: document.title,
  text: document.body ? document.body.innerText.length : 0,
  images: Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
                                                 width: i.naturalWidth, height: i.naturalHeight}))
})"""


def open_page(path: Path, *, binary: str | None = None, timeout: float = 60) -> PageCheck:
    """Loads `path` in headless Chromium and reports what happened (see the module docstring)."""
    binary = binary or find_chromium()
    if binary is None:
        raise RuntimeError("no Chromium installed")
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()
    with tempfile.TemporaryDirectory() as profile:

        # the child's fd 3 = commands in, fd 4 = replies out; the ends are first moved above 4 so
        # that putting one in place cannot overwrite the other
        spare = [os.dup(to_browser_r), os.dup(from_browser_w)]
        while min(spare[-2:]) <= 4:
            spare += [os.dup(spare[-2]), os.dup(spare[-1])]
        child_in, child_out = spare[-2:]

        def wire() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                pass_fds=(3, 4), preexec_fn=wire,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_browser_r, from_browser_w, *spare):
            os.close(fd)
        pipe = _Pipe(to_browser_w, from_browser_r)
        try:
            target = pipe.send("Target.createTarget", {"url": "about:blank"}, timeout=timeout)["targetId"]
            session = pipe.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                pipe.send(f"{domain}.enable", session=session)
            pipe.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
            pipe.wait_event("Page.loadEventFired", timeout=timeout)
            state = json.loads(pipe.send("Runtime.evaluate", {"expression": _PAGE_STATE, "returnByValue": True},
                                         session=session)["result"]["value"])
            shot = pipe.send("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
            check = PageCheck(state["title"], state["text"], state["images"], screenshot=base64.b64decode(shot))
            for event in pipe.events:
                method, params = event.get("method"), event.get("params", {})
                if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                    check.console_errors.append(json.dumps(params.get("args"))[:300])
                elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                    check.console_errors.append(params["entry"].get("text", "")[:300])
                elif method == "Runtime.exceptionThrown":
                    check.exceptions.append(json.dumps(params.get("exceptionDetails"))[:300])
                elif method == "Network.loadingFailed":
                    check.failed_requests.append(params.get("errorText", ""))
            try:
                pipe.send("Browser.close", timeout=10)
            except (RuntimeError, TimeoutError):
                pass
            return check
        finally:
            os.close(to_browser_w)
            os.close(from_browser_r)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
