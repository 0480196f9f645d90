"""A minimal W3C WebDriver client over the standard library, for the viewer's browser test:
Debian's `chromium` driven by its `chromedriver`, headless. Only what the test needs: open a
URL, find elements, click, type, pick an option, read text, run a script, take a screenshot."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"      # the W3C key of an element reference
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
DRIVERS = ("chromedriver",)


class WebDriverError(RuntimeError):
    pass


def find_program(names) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """A headless Chromium session: `with Browser() as b: b.open(url); b.click("#id")`."""

    def __init__(self, width: int = 1400, height: int = 1000) -> None:
        self.browser = find_program(BROWSERS)
        driver = find_program(DRIVERS)
        if not self.browser or not driver:
            raise WebDriverError("the viewer test needs Chromium and its driver: "
                                 "apt-get install chromium chromium-driver (make test does)")
        self.port = _free_port()
        self.proc = subprocess.Popen([driver, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.base = f"http://127.0.0.1:{self.port}"
        self._wait_ready()
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--allow-file-access-from-files"]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome",
                                                 "goog:chromeOptions": {"binary": self.browser, "args": args}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.base + "/status", timeout=2) as resp:
                    if json.load(resp).get("value", {}).get("ready"):
                        return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise WebDriverError(f"chromedriver exited with {self.proc.returncode}")
            time.sleep(0.1)
        raise WebDriverError("chromedriver did not start")

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                payload = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise WebDriverError(f"{method} {path}: {exc.read().decode(errors='replace')[:500]}") from None
        value = payload.get("value")
        if isinstance(value, dict) and value.get("error"):
            raise WebDriverError(f"{method} {path}: {value['error']}: {value.get('message', '')[:300]}")
        return value

    def _s(self, path: str) -> str:
        return f"/session/{self.session}{path}"

    # -- the page --
    def open(self, url: str) -> None:
        self._call("POST", self._s("/url"), {"url": url})

    def script(self, source: str, *args):
        return self._call("POST", self._s("/execute/sync"), {"script": source, "args": list(args)})

    def find_all(self, css: str) -> list[str]:
        found = self._call("POST", self._s("/elements"), {"using": "css selector", "value": css})
        return [e[ELEMENT] for e in found]

    def find(self, css: str) -> str:
        found = self.find_all(css)
        if not found:
            raise WebDriverError(f"no element matches {css!r}")
        return found[0]

    def click(self, css: str) -> None:
        self._call("POST", self._s(f"/element/{self.find(css)}/click"), {})

    def type(self, css: str, text: str) -> None:
        self._call("POST", self._s(f"/element/{self.find(css)}/value"), {"text": text})

    def choose(self, select_css: str, value: str) -> None:
        """Pick the option with this value in a <select>, as a user would (a click on it)."""
        self.click(select_css)
        self.click(f'{select_css} option[value="{value}"]')

    def text(self, css: str) -> str:
        return self._call("GET", self._s(f"/element/{self.find(css)}/text"))

    def texts(self, css: str) -> list[str]:
        return [self._call("GET", self._s(f"/element/{e}/text")) for e in self.find_all(css)]

    def screenshot(self, path: Path) -> None:
        Path(path).write_bytes(base64.b64decode(self._call("GET", self._s("/screenshot"))))

    def close(self) -> None:
        try:
            self._call("DELETE", self._s(""))
        except (WebDriverError, OSError):
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
