"""A small Chrome DevTools Protocol client for the browser tests: starts Debian's headless
`chromium` with a fresh profile, attaches to its page over the DevTools websocket
(python3-websocket), sends commands, and keeps every event it sees, so that a test can read
console errors and exceptions after the fact or answer network requests itself."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

import websocket


def find_chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


class CdpError(RuntimeError):
    pass


class Browser:
    """A headless Chromium with one page. Use as a context manager."""

    def __init__(self, width=1400, height=1000, extra_args=()):
        binary = find_chromium()
        if not binary:
            raise CdpError("chromium is not installed (Debian: chromium; tools/setup.sh installs it)")
        self.profile = tempfile.mkdtemp(prefix="ls-chromium-")
        args = [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--hide-scrollbars",
                "--mute-audio", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--metrics-recording-only", "--password-store=basic",
                f"--user-data-dir={self.profile}", "--remote-debugging-port=0",
                f"--window-size={width},{height}", *extra_args, "about:blank"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
            if self.proc.poll() is not None:
                raise CdpError(f"chromium exited with {self.proc.returncode}: {self.proc.stderr.read().decode()[-2000:]}")
            if time.time() > deadline:
                raise CdpError("chromium did not open its DevTools port in 30 s")
            time.sleep(0.05)
        port = int(open(port_file).read().split("\n")[0])
        self.ws = None
        deadline = time.time() + 10
        while self.ws is None:
            try:
                pages = json.loads(_http_get(f"http://127.0.0.1:{port}/json/list"))
                page = next(p for p in pages if p.get("type") == "page")
                self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30,
                                                      suppress_origin=True)
            except (OSError, StopIteration, ValueError, websocket.WebSocketException):
                if time.time() > deadline:
                    raise
                time.sleep(0.1)
        self.next_id = 0
        self.responses = {}    # command id -> its answer, until send() takes it
        self.events = []       # every event received, in order: {"method", "params"}
        self.handlers = {}     # method -> fn(params), called as events arrive
        for domain in ("Page", "Runtime", "Log"):
            self.send(domain + ".enable")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            if self.ws:
                self.ws.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def _receive(self, timeout):
        self.ws.settimeout(timeout)
        msg = json.loads(self.ws.recv())
        if "id" in msg:
            self.responses[msg["id"]] = msg
        elif "method" in msg:
            self.events.append(msg)
            handler = self.handlers.get(msg["method"])
            if handler:
                handler(msg.get("params", {}))
        return msg

    def send(self, method, timeout=30, **params):
        """Sends a command and returns its result; events that arrive meanwhile are kept (and their
        handlers run, which may send commands of their own)."""
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.time() + timeout
        while mid not in self.responses:
            left = deadline - time.time()
            if left <= 0:
                raise CdpError(f"{method}: no answer in {timeout} s")
            self._receive(left)
        msg = self.responses.pop(mid)
        if "error" in msg:
            raise CdpError(f"{method}: {msg['error']}")
        return msg.get("result", {})

    def pump(self, seconds):
        """Receives events for `seconds` (so that handlers run)."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                self._receive(max(0.01, deadline - time.time()))
            except websocket.WebSocketTimeoutException:
                pass

    def evaluate(self, expression):
        """The value of a JavaScript expression (awaited when it is a promise), as JSON data."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise CdpError(f"{expression[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=30, poll=0.2):
        """Waits until a JavaScript expression is truthy (one that throws, e.g. while a page loads,
        counts as false); returns its value."""
        deadline = time.time() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except CdpError:
                value = None
            if value:
                return value
            if time.time() > deadline:
                raise CdpError(f"timed out after {timeout} s waiting for: {expression}")
            self.pump(poll)

    def navigate(self, url):
        self.send("Page.navigate", url=url)

    def screenshot(self, path=None, clip=None):
        """A PNG of the whole page, or of `clip` ({"x", "y", "width", "height"} in CSS pixels of the
        page); written to `path` when given; returns its bytes."""
        params = {"format": "png", "captureBeyondViewport": True}
        if not clip:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"]}
        params["clip"] = dict(clip, scale=1)
        data = base64.b64decode(self.send("Page.captureScreenshot", **params)["data"])
        if path:
            with open(path, "wb") as f:
                f.write(data)
        return data

    def errors(self):
        """Console errors, uncaught exceptions and error log entries seen so far, as text."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + d.get("exception", {}).get("description", d.get("text", "")))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console." + p["type"] + ": " + " ".join(str(a.get("value", a.get("description", "")))
                                                                  for a in p.get("args", [])))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
        return out


def _http_get(url):
    import urllib.request
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()
