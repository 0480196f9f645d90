"""The part of the sandbox that runs INSIDE the untrusted child process.

It loads the submission, answers the judge's call requests with plain data,
and reports exceptions. Nothing here decides a verdict: a submission that
tampers with this module (it can: it shares the process) can at most change
the values it returns, which the trusted judge then checks. See judge.py.
"""
from __future__ import annotations

import builtins
import io
import marshal
import os
import resource
import sys
import threading

from . import plaindata
from .child_env import Channel, audit_hook, exc_info, flush, forget_sources, register_source
from .limits import Limits, apply_rlimits, job_rlimits
from .protocol import PROGRAM_FILE, SETUP_FAILED_CODE, SUBMISSION_FILE, encode_request, error_reply


_LIMITED = {"limited": True}


class Harness:
    def __init__(self, chan: Channel, base_vm: int = 0):
        self.chan = chan
        self.ns: dict | None = None
        self.seq = 0   # number of calls started so far (0 while loading)
        self.base_vm = base_vm
        self.limited = False

    def apply_job_limits(self, msg) -> None:
        """Set the job's address-space and CPU limits (once, before any submission code runs)
        and acknowledge them: ``{"limited": true}``, the first frame after ``ready``, sent
        before the submission runs, so it is the trusted side's own word (whatever a
        submission sends later cannot be it). Failing that, ``{"limits_error": ...}`` and exit."""
        if self.limited:
            return
        try:
            r = resource.getrusage(resource.RUSAGE_SELF)
            plan = job_rlimits(Limits(float(msg["timeout_s"]), int(msg["memory_mb"])), self.base_vm,
                               r.ru_utime + r.ru_stime)
            apply_rlimits(plan)
        except BaseException as e:
            try:
                self.chan.send({"limits_error": f"rlimits: {type(e).__name__}: {e}"})
            finally:
                os._exit(SETUP_FAILED_CODE)
        self.limited = True
        self.chan.send(_LIMITED)

    # -- ops ----------------------------------------------------------------
    def load(self, msg) -> dict:
        self.apply_job_limits(msg)
        code = msg["code"]
        bytecode = msg.get("bytecode")
        entry = msg["candidate"]
        register_source(SUBMISSION_FILE, code)
        try:
            if bytecode:  # compiled by the judge: parsing here would cost more (page faults)
                co = marshal.loads(bytecode)
            else:
                co = compile(code, SUBMISSION_FILE, "exec", dont_inherit=True)
        except BaseException as e:  # SyntaxError, ValueError (null bytes), MemoryError, RecursionError
            return {"ok": False, "phase": "compile", "exc": exc_info(e, SUBMISSION_FILE)}
        ns = {"__name__": "__submission__", "__builtins__": builtins}
        self.ns = ns
        try:
            exec(co, ns)
        except BaseException as e:
            return {"ok": False, "phase": "load", "exc": exc_info(e, SUBMISSION_FILE)}
        fn = ns.get(entry)
        if fn is None or not callable(fn):
            what = "is not defined" if fn is None else f"is not callable (it is a {type(fn).__name__})"
            return error_reply("EntryPointMissing", f"entry point {entry!r} {what}", phase="entry_point")
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
            return error_reply("RuntimeError", "nothing loaded")
        try:
            fn = ns[msg["name"]]
            args = plaindata.decode(msg["args"])
            kwargs = plaindata.decode(msg["kwargs"])
        except BaseException as e:
            return {"ok": False, "exc": exc_info(e, SUBMISSION_FILE)}
        try:
            result = fn(*args, **kwargs)
        except BaseException as e:
            return {"ok": False, "exc": exc_info(e, SUBMISSION_FILE)}
        try:
            return {"ok": True, "value": plaindata.encode(result)}
        except plaindata.Unsupported as u:
            return {"ok": False, "unsupported": str(u)}
        except MemoryError:
            return error_reply("MemoryError", "while encoding the result")
        except BaseException as e:
            return {"ok": False, "unsupported": f"result could not be encoded ({type(e).__name__})"}

    def run_program(self, msg):
        """Run a whole program as __main__, then exit with its status (never returns)."""
        program = msg["program"]
        self.apply_job_limits(msg)
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
            self.chan.send({"exc": exc_info(e, PROGRAM_FILE)})
            code = 1
        flush()
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
                flush()
                chan.send(reply)
                if reply.get("ok") is not True:
                    break
            return
        elif op == "load":
            reply = self.load(msg)
        elif op == "run":
            self.run_program(msg)
        elif op == "exit":
            flush()
            os._exit(0)
        else:
            reply = error_reply("ProtocolError", f"unknown op {op!r}")
        flush()
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
    load = {"op": "load", "code": _WARM_CODE, "bytecode": marshal.dumps(code), "candidate": "warm",
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
        forget_sources(SUBMISSION_FILE)


def prepare(chan: Channel, report_forbidden: bool = True, base_vm: int = 0):
    """Build a child's harness and audit hook, in the zygote, once: every child starts from its
    own (copy-on-write) copy of these pristine objects instead of allocating them itself.

    ``report_forbidden``: report attempts at what the seccomp filter denies (only
    meaningful, and only done, when the filter is active).
    """
    h = Harness(chan, base_vm)
    return h, (audit_hook(chan, h) if report_forbidden else None)


def start(prepared) -> None:
    """Final in-child steps before untrusted code runs (after privileges and seccomp are set)."""
    h, hook = prepared
    if hook is not None:
        sys.addaudithook(hook)
    h.serve()
