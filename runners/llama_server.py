"""Start and stop llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``).

Some libraries talk to a model only through an OpenAI-compatible URL (memory systems, for
example).  :class:`LlamaServer` runs llama-cpp-python's own server on a GGUF file in a child
process bound to 127.0.0.1, on a free port, waits until ``GET /v1/models`` answers, and stops
it (SIGTERM, then SIGKILL) on :meth:`stop` or when the ``with`` block ends.  Its output goes to
a log file whose tail is quoted when the server dies during start-up.

The server needs llama-cpp-python's ``server`` extra (fastapi, uvicorn, sse-starlette,
starlette-context, pydantic-settings); :func:`missing_server_modules` names what is missing.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from .engine import EngineUnavailable
from .cpus import usable_cores

SERVER_MODULES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
SERVER_REQUIREMENT = "llama-cpp-python[server]==0.3.36"
DEFAULT_N_CTX = 16384
LOG_TAIL = 2000


def missing_server_modules() -> list[str]:
    """The server's modules that are not importable here (empty when it can start)."""
    missing = []
    for name in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """In the child, before exec (Linux): SIGTERM when the process that started it dies, so a
    killed run leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _tail(path: Path, n: int = LOG_TAIL) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


class LlamaServer:
    """One llama.cpp server process.  ``module`` is the Python module run with ``-m`` (tests
    substitute a small stand-in that takes the same flags)."""

    def __init__(self, model_path: str | os.PathLike[str], *, alias: str = "local", n_ctx: int = DEFAULT_N_CTX,
                 host: str = "127.0.0.1", port: int | None = None, n_threads: int | None = None,
                 log_path: str | os.PathLike[str] | None = None, startup_timeout_s: float = 600.0,
                 module: str = "llama_cpp.server", python: str = sys.executable,
                 extra_args: Sequence[str] = ()) -> None:
        self.model_path = str(model_path)
        self.alias = alias
        self.n_ctx = int(n_ctx)
        self.host = host
        self.port = int(port) if port else None
        self.n_threads = int(n_threads or usable_cores())   # llama.cpp's server alone would take half
        self.log_path = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        self.startup_timeout_s = float(startup_timeout_s)
        self.module = module
        self.python = python
        self.extra_args = list(extra_args)
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the server has no port before start()")
        return f"http://{self.host}:{self.port}/v1"

    def argv(self) -> list[str]:
        args = [self.python, "-m", self.module, "--model", self.model_path, "--model_alias", self.alias,
                "--n_ctx", str(self.n_ctx), "--host", self.host, "--port", str(self.port)]
        return args + ["--n_threads", str(self.n_threads)] + self.extra_args

    def start(self) -> "LlamaServer":
        if self.proc is not None:
            return self
        if self.module == "llama_cpp.server":
            missing = missing_server_modules()
            if missing:
                raise EngineUnavailable(f"llama.cpp's server cannot start: module(s) {', '.join(missing)} missing; "
                                        f"install them with: pip install '{SERVER_REQUIREMENT}' "
                                        "(or the project's extra: pip install -e '.[server]')")
        if not Path(self.model_path).is_file():
            raise EngineUnavailable(f"llama.cpp's server: model file {self.model_path} does not exist")
        self.port = self.port or free_port(self.host)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True,
                                         preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout_s
        url = self.base_url + "/models"
        while True:
            code = self.proc.poll() if self.proc else None
            if code is not None:
                raise EngineUnavailable(f"llama.cpp's server exited with status {code} during start-up "
                                        f"({' '.join(self.argv())}); log {self.log_path}:\n{_tail(self.log_path)}")
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise EngineUnavailable(f"llama.cpp's server did not answer {url} within {self.startup_timeout_s:.0f} s; "
                                        f"log {self.log_path}:\n{_tail(self.log_path)}")
            time.sleep(0.25)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            proc.wait(timeout=grace_s)

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def describe(self) -> dict:
        return {"server": self.module, "model_path": self.model_path, "alias": self.alias, "n_ctx": self.n_ctx,
                "base_url": self.base_url if self.port else None, "log": str(self.log_path)}


__all__ = ["DEFAULT_N_CTX", "LlamaServer", "SERVER_REQUIREMENT", "free_port", "missing_server_modules"]
