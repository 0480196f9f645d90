"""Compiling submissions within the job's limits: small ones in the worker, the rest in a
limited helper process forked from it.

``compile()`` runs no code, but its cost is the submission's to choose: some sources take
time quadratic in their size (a large f-string: 4 s for 256 KiB, an hour for the 8 MiB a
submission may have), some a lot of memory. A source of up to IN_WORKER_MAX_CHARS is
compiled in the worker: at that size the slowest source we could construct (512 nested
lambdas) took about 30 ms, an f-string of that size 4 ms, and almost every real solution
is smaller. Anything larger goes to a long-lived helper that compiles it under the job's
limits: its address space is capped at ``memory_mb`` above its own size for the request,
and a request not answered within the job's time limit gets the helper killed (a fresh
one is forked for the next). The helper is warm, so this costs a pipe round trip, not the
copy-on-write faults that compiling in each sandboxed child would cost (~0.3 ms a job).
The child receives the marshalled code object; the worker only passes the bytes along.
"""
from __future__ import annotations

import json
import marshal
import os
import resource
import select
import signal
import time
import warnings
from dataclasses import dataclass

from . import namespaces
from .limits import MiB, vm_size_bytes
from .protocol import HEADER, SUBMISSION_FILE, exc_record, read_exact, write_all

MAX_CODE_CHARS = 8 * 1024 * 1024
IN_WORKER_MAX_CHARS = 4096
CACHE_SIZE = 64
# Bytecode can be far larger than its source (constant folding: ``x = [1] * 10**6`` is 20
# bytes of source, 8 MiB of code object), so the cache is bounded by bytes as well.
CACHE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Compiled:
    bytecode: bytes | None = None   # marshalled code object
    exc: dict | None = None         # or: why it does not compile (an exception record)
    timed_out: bool = False         # or: compiling took longer than the job's time limit
    seconds: float = 0.0            # how long it took


def compile_here(code: str) -> tuple[bytes | None, dict | None]:
    """Compile ``code`` (in the helper): (marshalled code object, None) or (None, exc record).

    Silently: the warnings compiling may raise (a SyntaxWarning per ``x is 1``, say; one job
    can hold 60,000) are ignored, never printed on the worker's stderr."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            co = compile(code, SUBMISSION_FILE, "exec", dont_inherit=True)
    except SyntaxError as e:
        line = (e.text or "").strip()[:500] or None
        where = f" (line {e.lineno})" if e.lineno else ""
        return None, exc_record(type(e).__name__, f"{e.msg}{where}", line=line, lineno=e.lineno)
    except (ValueError, OverflowError, RecursionError, MemoryError, UnicodeError) as e:
        try:
            msg = str(e)[:2000]
        except BaseException:
            msg = ""
        return None, exc_record(type(e).__name__, msg or type(e).__name__)
    return marshal.dumps(co), None


def _serve(req_fd: int, rep_fd: int) -> None:
    """The helper's loop: (source, memory_mb) in, b"C" + bytecode or b"E" + JSON record out."""
    base = vm_size_bytes()
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    while True:
        head = read_exact(req_fd, HEADER.size)
        data = read_exact(req_fd, HEADER.unpack(head)[0]) if head else None
        if data is None:
            return
        code, memory_mb = marshal.loads(data)
        cap = base + memory_mb * MiB
        resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 or cap < hard else hard, hard))
        try:
            bytecode, exc = compile_here(code)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (hard, hard))
        out = b"C" + bytecode if bytecode is not None else b"E" + json.dumps(exc).encode()
        write_all(rep_fd, HEADER.pack(len(out)) + out)


class CompileHelper:
    """The worker's handle on its compile helper (started on first use, re-forked after a kill).

    ``seccomp``: the children's compiled seccomp filter (``CompiledFilter``), installed in the
    helper before it reads any source; ``None`` without the seccomp layer."""

    def __init__(self, seccomp=None):
        self.pid: int | None = None
        self.req = self.rep = -1
        self.seccomp = seccomp
        self._cache: dict[str, Compiled] = {}
        self._cache_bytes = 0

    def start(self) -> None:
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                # keep only its own pipes: not the worker's (the pool must see the worker's
                # pipes close when it dies, the zygote its socket), nor any child's
                low, high = sorted((req_r, rep_w))
                os.closerange(3, low)
                os.closerange(low + 1, high)
                os.closerange(high + 1, os.sysconf("SC_OPEN_MAX"))
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 2)   # nothing it prints reaches the evaluator's stderr
                os.close(null)
                namespaces.set_pdeathsig(signal.SIGKILL)
                if self.seccomp is not None:   # untrusted source: under the children's filter
                    self.seccomp.set_no_new_privs()
                    self.seccomp.install()
                _serve(req_r, rep_w)
            finally:
                os._exit(0)
        os.close(req_r)
        os.close(rep_w)
        self.pid, self.req, self.rep = pid, req_w, rep_r

    def stop(self) -> None:
        if self.pid is None:
            return
        for fd in (self.req, self.rep):
            os.close(fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.pid = None

    def compile(self, code: str, timeout_s: float, memory_mb: int) -> Compiled:
        if len(code) > MAX_CODE_CHARS:
            return Compiled(exc=exc_record("SubmissionTooLarge", f"the submission has {len(code)} characters "
                                                                 f"(limit {MAX_CODE_CHARS})"))
        hit = self._cache.get(code)
        if hit is not None:
            return hit
        t0 = time.monotonic()
        if len(code) <= IN_WORKER_MAX_CHARS:
            bytecode, exc = compile_here(code)
            return self._remember(code, Compiled(bytecode=bytecode, exc=exc, seconds=time.monotonic() - t0))
        if self.pid is None:
            self.start()
        try:
            request = marshal.dumps((code, memory_mb))
            write_all(self.req, HEADER.pack(len(request)) + request)
            reply = self._answer(t0 + timeout_s)
        except (OSError, EOFError):   # the helper died compiling this
            self.stop()
            return Compiled(exc=exc_record("CompileError", "the compiler crashed on the submission"),
                            seconds=time.monotonic() - t0)
        took = time.monotonic() - t0
        if reply is None:   # too slow: the next job gets a fresh helper
            self.stop()
            return Compiled(timed_out=True, seconds=took)
        if reply[:1] == b"C":
            result = Compiled(bytecode=reply[1:], seconds=took)
        else:
            result = Compiled(exc=json.loads(reply[1:]), seconds=took)
        if result.exc is not None and result.exc.get("type") == "MemoryError":
            self.stop()     # (not cached: it depends on memory_mb; the helper may be bloated)
            return result
        return self._remember(code, result)

    def _remember(self, code: str, result: Compiled) -> Compiled:
        size = _size(code, result)
        if size > CACHE_BYTES:
            return result
        while self._cache and (len(self._cache) >= CACHE_SIZE or self._cache_bytes + size > CACHE_BYTES):
            old = next(iter(self._cache))
            self._cache_bytes -= _size(old, self._cache.pop(old))
        self._cache[code] = result
        self._cache_bytes += size
        return result

    def _answer(self, deadline: float) -> bytes | None:
        """The helper's reply; None if none came by ``deadline``; EOFError if the helper died."""
        buf = bytearray()
        need = HEADER.size
        while True:
            while len(buf) < need:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([self.rep], [], [], left)[0]:
                    return None
                chunk = os.read(self.rep, 1 << 20)
                if not chunk:
                    raise EOFError
                buf += chunk   # (a bytearray grows in place: linear in the reply's size)
            if need == HEADER.size:
                need += HEADER.unpack_from(buf)[0]
                continue
            return bytes(memoryview(buf)[HEADER.size:need])


def _size(code: str, result: Compiled) -> int:
    return len(code) + len(result.bytecode or b"")
