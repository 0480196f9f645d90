"""The part of the sandbox that runs INSIDE the untrusted child process.

It loads the submission, answers the judge's call requests with plain data,
and reports exceptions. Nothing here decides a verdict: a submission that
tampers with this module (it can: it shares the process) can at most change
the values it returns, which the trusted judge then checks. See judge.py.
"""
from __future__ import annotations

import builtins
import io
import linecache
import marshal
import os
import resource
import sys
import threading
import traceback

from . import plaindata
from .limits import Limits, apply_rlimits, job_rlimits
from .protocol import HEADER, encode_frame, encode_request

REQ_FD = 3   # judge -> child requests
REP_FD = 4   # child -> judge replies and events

SETUP_FAILED_CODE = 70
SUBMISSION_FILE = "<submission>"
PROGRAM_FILE = "<program>"

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

_MEMORY_REPLY = encode_frame({"ok": False, "exc": {"type": "MemoryError", "message": "", "errno": None, "line": None}})


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
        while len(data) < n:
            more = os.read(fd, n - len(data))
            if not more:
                return None
            data += more
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


def _flush() -> None:
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


def _exc_info(e: BaseException, filename: str) -> dict:
    info = {"type": "BaseException", "message": "", "errno": None, "line": None, "lineno": None}
    try:
        info["type"] = type(e).__name__
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
        # Mirror what Python would print, for the feedback shown to the model.
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    except BaseException:
        pass
    return info


def _audit_hook_factory(chan: Channel, h: "Harness"):
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


class Harness:
    def __init__(self, chan: Channel, base_vm: int = 0):
        self.chan = chan
        self.ns: dict | None = None
        self.seq = 0   # number of calls started so far (0 while loading)
        self.base_vm = base_vm
        self.limited = False

    def apply_job_limits(self, msg) -> dict | None:
        """Set the job's address-space and CPU limits (once, before any submission code runs)."""
        if self.limited:
            return None
        try:
            r = resource.getrusage(resource.RUSAGE_SELF)
            plan = job_rlimits(Limits(float(msg["timeout_s"]), int(msg["memory_mb"])), self.base_vm,
                               r.ru_utime + r.ru_stime)
            apply_rlimits(plan)
        except BaseException as e:
            return {"ok": False, "exc": {"type": "SandboxSetupError", "message": f"rlimits: {e}", "errno": None,
                                         "line": None, "lineno": None}}
        self.limited = True
        return None

    # -- ops ----------------------------------------------------------------
    def load(self, msg) -> dict:
        failed = self.apply_job_limits(msg)
        if failed:
            return failed
        code = msg["code"]
        bytecode = msg.get("bytecode")
        entry = msg["entry_point"]
        register_source(SUBMISSION_FILE, code)
        try:
            if bytecode:  # compiled by the judge: parsing here would cost more (page faults)
                co = marshal.loads(bytecode)
            else:
                co = compile(code, SUBMISSION_FILE, "exec", dont_inherit=True)
        except BaseException as e:  # SyntaxError, ValueError (null bytes), MemoryError, RecursionError
            return {"ok": False, "phase": "compile", "exc": _exc_info(e, SUBMISSION_FILE)}
        ns = {"__name__": "__submission__", "__builtins__": builtins}
        self.ns = ns
        try:
            exec(co, ns)
        except BaseException as e:
            return {"ok": False, "phase": "load", "exc": _exc_info(e, SUBMISSION_FILE)}
        fn = ns.get(entry)
        if fn is None or not callable(fn):
            what = "is not defined" if fn is None else f"is not callable (it is a {type(fn).__name__})"
            return {"ok": False, "phase": "entry_point",
                    "exc": {"type": "EntryPointMissing", "message": f"entry point {entry!r} {what}",
                            "errno": None, "line": None, "lineno": None}}
        defs = {}
        for name in msg.get("names", ()):
            if name not in ns:
                continue
            v = ns[name]
            if callable(v):
                defs[name] = "fn"
            else:
                try:
                    defs[name] = {"v": plaindata.encode(v)}
                except BaseException:
                    pass
        return {"ok": True, "defs": defs}

    def call(self, msg) -> dict:
        self.seq += 1
        ns = self.ns
        if ns is None:
            return {"ok": False, "exc": {"type": "RuntimeError", "message": "nothing loaded", "errno": None,
                                         "line": None, "lineno": None}}
        try:
            fn = ns[msg["name"]]
            args = plaindata.decode(msg["args"])
            kwargs = plaindata.decode(msg["kwargs"])
        except BaseException as e:
            return {"ok": False, "exc": _exc_info(e, SUBMISSION_FILE)}
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            return {"ok": False, "exc": _exc_info(e, SUBMISSION_FILE)}
        try:
            return {"ok": True, "value": plaindata.encode(result)}
        except plaindata.Unsupported as u:
            return {"ok": False, "unsupported": str(u)}
        except MemoryError:
            return {"ok": False, "exc": {"type": "MemoryError", "message": "while encoding the result",
                                         "errno": None, "line": None, "lineno": None}}
        except BaseException as e:
            return {"ok": False, "unsupported": f"result could not be encoded ({type(e).__name__})"}

    def run_program(self, msg):
        """Run a whole program as __main__, then exit with its status (never returns)."""
        program = msg["program"]
        failed = self.apply_job_limits(msg)
        if failed:
            self.chan.send({"exc": failed["exc"]})
            _flush()
            os._exit(SETUP_FAILED_CODE)
        register_source(PROGRAM_FILE, program)
        sys.argv[:] = ["program.py"]
        ns = {"__name__": "__main__", "__builtins__": builtins, "__file__": "program.py"}
        code = 0
        try:
            exec(compile(program, PROGRAM_FILE, "exec"), ns)
            try:
                threading._shutdown()  # join non-daemon threads, as the interpreter would
            except BaseException:
                pass
        except SystemExit as e:
            c = e.code
            if c is None:
                code = 0
            elif type(c) is int or type(c) is bool:
                code = int(c) & 0xFF
            else:
                try:
                    print(c, file=sys.stderr)
                except BaseException:
                    pass
                code = 1
            if code:
                self.chan.send({"exit": code})
        except BaseException as e:
            self.chan.send({"exc": _exc_info(e, PROGRAM_FILE)})
            code = 1
        _flush()
        os._exit(code)

    # -- loop ---------------------------------------------------------------
    def serve(self) -> None:
        chan = self.chan
        while True:
            try:
                msg = chan.recv()
            except BaseException:
                os._exit(3)
            if msg is None:
                os._exit(0)
            self.handle(msg)

    def handle(self, msg) -> None:
        """Answer one request (``run`` and ``exit`` end the process)."""
        chan = self.chan
        op = msg.get("op")
        if op == "call":
            reply = self.call(msg)
        elif op == "batch":
            # Prefetched calls: run them in order, one reply each, stop at the first failure.
            for c in msg.get("calls", ()):
                reply = self.call(c)
                _flush()
                chan.send(reply)
                if reply.get("ok") is not True:
                    break
            return
        elif op == "load":
            reply = self.load(msg)
        elif op == "run":
            self.run_program(msg)
        elif op == "exit":
            _flush()
            os._exit(0)
        else:
            reply = {"ok": False, "exc": {"type": "ProtocolError", "message": f"unknown op {op!r}",
                                          "errno": None, "line": None, "lineno": None}}
        _flush()
        chan.send(reply)


# A fixed, trusted stand-in job (never anything from a real job) that the zygote runs through
# the child's own code paths before it forks any child. See warm_up().
_WARM_CODE = (
    "def warm(a, b=None, *rest, **kw):\n"
    "    if a == 'raise':\n"
    "        raise ValueError('warm-up')\n"
    "    return [a, b, len(rest), sorted(kw), (1, 2.5, 'x', b'y', None, True), {'k': [a]}, {3}, frozenset(),\n"
    "            1 << 70, -(1 << 70)]\n"
    "WARM_VALUE = {'a': (1, 2)}\n"
)
_WARM_ARGS = (
    (1, "s"), ([1, 2, 3], (1, "x")), ({"k": 1.5}, {1, 2}), (b"x", None), (frozenset([True, False]), 10 ** 20),
    (-3, 0.25), (["a", ["b", ["c"]]], ""),
)


def warm_up(rounds: int = 12) -> None:
    """Run a stand-in job through the child's code paths here, in the zygote, before any fork.

    CPython 3.11 rewrites bytecode as it runs (quickening, inline-cache counters) and fills
    its global method cache on first use; every such write in a forked child lands on a page
    shared with the zygote and costs a copy-on-write fault. Running the paths once here (the
    protocol decode/encode, bytecode loading, plain-data codec, the call loop and the
    exception report) makes the child's runs of them read-mostly. The stand-in is fixed,
    trusted code; its namespace and caches are dropped afterwards. Job limits are not applied.
    """
    code = compile(_WARM_CODE, SUBMISSION_FILE, "exec", dont_inherit=True)
    load = {"op": "load", "code": _WARM_CODE, "bytecode": marshal.dumps(code), "entry_point": "warm",
            "names": ["WARM_VALUE", "missing", "warm"], "timeout_s": 1.0, "memory_mb": 1}
    enc = plaindata.encode
    calls = [{"name": "warm", "args": enc(list(a)), "kwargs": enc({"k": i} if i % 2 else {})}
             for i, a in enumerate(_WARM_ARGS)]
    batch = {"op": "batch", "calls": calls + [{"name": "warm", "args": ["raise"], "kwargs": enc({})}]}
    single = {"op": "call", "name": "warm", "args": [1, 2, 3], "kwargs": enc({})}
    req_r, req_w = os.pipe()
    rep_r, rep_w = os.pipe()
    saved_err = sys.stderr
    try:
        sys.stderr = io.StringIO()  # the exception report prints a traceback
        h = Harness(Channel(req_r, rep_w))
        h.limited = True
        for _ in range(rounds):
            for msg in (load, batch, single):
                os.write(req_w, encode_request(msg))
                h.handle(h.chan.recv())
                os.read(rep_r, 1 << 20)  # the replies (a few hundred bytes)
    finally:
        sys.stderr = saved_err
        for fd in (req_r, req_w, rep_r, rep_w):
            os.close(fd)
        linecache.cache.pop(SUBMISSION_FILE, None)
        _SOURCES.clear()


def prepare(chan: Channel, report_forbidden: bool = True, base_vm: int = 0):
    """Build a child's harness and audit hook, in the zygote, once: every child starts from its
    own (copy-on-write) copy of these pristine objects instead of allocating them itself.

    ``report_forbidden``: report attempts at what the seccomp filter denies (only
    meaningful, and only done, when the filter is active).
    """
    h = Harness(chan, base_vm)
    return h, (_audit_hook_factory(chan, h) if report_forbidden else None)


def start(prepared) -> None:
    """Final in-child steps before untrusted code runs (after privileges and seccomp are set)."""
    h, hook = prepared
    if hook is not None:
        sys.addaudithook(hook)
    h.serve()
