"""The untrusted child's surroundings, prepared once in the zygote: its reply channel, std
streams, import guard, lazily split sources, exception reports and the audit hook.

Like harness.py this runs in the sandboxed process; nothing here decides a verdict.
"""
from __future__ import annotations

import io
import linecache
import marshal
import os
import sys
import threading
import traceback

from .protocol import HEADER, REP_FD, REQ_FD, encode_frame, error_reply, exc_record

# Audit events that mean the submission tried something the seccomp filter denies.
FORBIDDEN_EVENTS = {
    "socket.__new__": "socket()",
    "os.fork": "os.fork()",
    "os.forkpty": "os.forkpty()",
    "os.posix_spawn": "os.posix_spawn()",
    "os.spawn": "os.spawn*()",
    "os.exec": "os.exec*()",
    "os.system": "os.system()",
    "subprocess.Popen": "subprocess",
    "pty.spawn": "pty.spawn()",
}

_MEMORY_REPLY = encode_frame(error_reply("MemoryError", ""))


class Channel:
    def __init__(self, req_fd: int = REQ_FD, rep_fd: int = REP_FD):
        self.req_fd = req_fd
        self.rep_fd = rep_fd
        self._lock = threading.RLock()
        self._write = os.write

    def send_bytes(self, data: bytes) -> None:
        with self._lock:
            view = memoryview(data)
            while view:
                n = self._write(self.rep_fd, view)
                view = view[n:]

    def send(self, obj) -> None:
        try:
            data = encode_frame(obj)
        except MemoryError:
            data = _MEMORY_REPLY
        self.send_bytes(data)

    def recv(self):
        """The next request from the judge (marshal data, see protocol.encode_request); None at EOF."""
        fd = self.req_fd
        head = os.read(fd, 4)
        while len(head) < 4:
            more = os.read(fd, 4 - len(head))
            if not more:
                return None
            head += more
        (n,) = HEADER.unpack(head)
        data = os.read(fd, n)
        if len(data) < n:   # a large request: gather it in one buffer (linear, not quadratic)
            buf = bytearray(data)
            while len(buf) < n:
                more = os.read(fd, n - len(buf))
                if not more:
                    return None
                buf += more
            data = buf
        return marshal.loads(data)


class _RefuseImports:
    """Last entry on sys.meta_path: only already-loaded (or built-in) modules can be imported."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        raise ModuleNotFoundError(
            f"No module named {name!r} in the sandbox: only modules preloaded by the sandbox "
            f"worker can be imported (see sandbox/preload.py)", name=name)


# Source text for linecache, split into lines only when something asks for it (a traceback,
# inspect.getsource, ...): most jobs never do, and splitting costs a child some thirty
# copy-on-write faults.
_SOURCES: dict[str, str] = {}
_plain_updatecache = linecache.updatecache


def _updatecache(filename, module_globals=None):
    source = _SOURCES.pop(filename, None)
    if source is not None:
        lines = source.splitlines(True)
        linecache.cache[filename] = (len(source), None, lines, filename)
        return lines
    return _plain_updatecache(filename, module_globals)


def register_source(filename: str, source: str) -> None:
    """Make ``source`` what linecache (and so traceback, inspect) shows for ``filename``."""
    linecache.cache.pop(filename, None)
    _SOURCES[filename] = source


def forget_sources(filename: str) -> None:
    linecache.cache.pop(filename, None)
    _SOURCES.clear()


def install_lazy_sources() -> None:
    linecache.updatecache = _updatecache


def install_import_guard() -> None:
    from importlib.machinery import BuiltinImporter, FrozenImporter
    sys.meta_path[:] = [BuiltinImporter, FrozenImporter, _RefuseImports]
    sys.path[:] = []
    sys.path_importer_cache.clear()
    for name in list(sys.modules):
        if name == "sandbox" or name.startswith("sandbox.") or name in ("pyseccomp", "ctypes", "_ctypes") \
                or name.startswith("ctypes."):
            del sys.modules[name]


def setup_streams() -> None:
    sys.stdin = sys.__stdin__ = io.open(0, "r", encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = sys.__stdout__ = io.open(1, "w", encoding="utf-8", errors="backslashreplace",
                                         buffering=1, closefd=False)
    sys.stderr = sys.__stderr__ = io.open(2, "w", encoding="utf-8", errors="backslashreplace",
                                         buffering=1, closefd=False)


def flush() -> None:
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except BaseException:
            pass


def _safe_str(e: BaseException) -> str:
    try:
        s = str(e)
    except BaseException:
        s = "<unprintable exception>"
    if type(s) is not str:
        s = "<unprintable exception>"
    return s[:2000]


def exc_info(e: BaseException, filename: str) -> dict:
    """The report of an exception the submission raised, and its traceback on stderr."""
    info = exc_record("BaseException", "")
    try:
        info["type"] = type(e).__name__
        info["exception"] = isinstance(e, Exception)   # (a test's `except Exception` would catch it)
        info["message"] = _safe_str(e)
        if isinstance(e, OSError) and type(e.errno) is int:
            info["errno"] = e.errno
        if isinstance(e, SyntaxError) and type(e.lineno) is int:
            info["lineno"] = e.lineno
            info["line"] = (e.text or "").strip()[:500] or None
        else:
            tb = e.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == filename:
                    info["lineno"] = tb.tb_lineno
                tb = tb.tb_next
            if info["lineno"]:
                info["line"] = linecache.getline(filename, info["lineno"]).strip()[:500] or None
        # Mirror what Python would print, for the feedback shown to the model: from the
        # submission's first frame on (the harness's frames above it would show host paths).
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb, file=sys.stderr)
    except BaseException:
        pass
    return info


def audit_hook(chan: Channel, h):
    """Reports attempts at what the seccomp filter denies, tagged with the call (``h.seq``)."""
    seen: set[str] = set()

    def hook(event, args):
        what = FORBIDDEN_EVENTS.get(event)
        if what is None:
            if event != "os.kill" or len(args) < 1 or args[0] in (0, 1):
                return
            what = "os.kill(another process)"
        if len(seen) > 20:
            return
        try:
            if event == "socket.__new__" and len(args) >= 2:
                what = f"socket(family={int(args[1])})"
            # One report per action and call, tagged with the call it happened in, so the
            # judge can ignore what prefetched calls the real test never made did.
            tag = f"{what}@{h.seq}"
            if tag in seen:
                return
            seen.add(tag)
            chan.send({"event": "forbidden", "what": what, "seq": h.seq})
        except BaseException:
            pass

    return hook
