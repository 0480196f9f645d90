"""What happened in one execution -> its ``(status, failure)``: the one place that decides.

The judge (check) and the program runner (run) record what they saw in a ``Happened``
and call ``decide``; nothing else maps events to statuses. ``decide`` is pure.
"""
from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass

from .protocol import SETUP_FAILED_CODE
from .verdict import BLOCKED, ERROR, FAILED, MEMORY, PASSED, SANDBOX_ERROR, TIMEOUT, Failure

# Raised by the submission, these end the run at once (they are not errors a test could expect).
NON_EXCEPTIONS = ("SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException", "BaseExceptionGroup")


@dataclass(slots=True)
class Happened:
    """What the trusted side saw of one execution; fields left at their defaults did not happen."""

    run_program: bool = False        # run(): passed iff the program exits with status 0
    setup_error: str | None = None   # our side failed (never the submission's doing)
    ready: bool = True               # the child finished its (trusted) setup
    where: str = ""                  # "while loading", "during a call", "while compiling", ...
    time_limit_s: float = 0.0
    timed_out: bool = False
    exc: dict | None = None          # what the submission raised (a cleaned exception record)
    died: bool = False               # the child ended while the judge waited on it
    exit_status: int | None = None   # its wait status, when it ended and was reaped
    cpu_s: float = 0.0
    cpu_limit_s: float = 0.0
    oom_killed: bool = False         # the memory cgroup's OOM killer ended it
    protocol: str | None = None      # it broke the protocol (malformed or forged frames)
    rejected: Failure | None = None  # a result the judge would not rebuild (unsupported type, too large)
    test_failure: Failure | None = None   # the trusted test failed: an assert, or comparing a wrong result
    line: str | None = None          # the test's line where it happened (check): quoted in the failure
    forbidden: tuple[str, ...] = ()  # forbidden actions the submission attempted (in calls the test made)


def decide(h: Happened) -> tuple[str, Failure | None]:
    """The verdict's status and failure for what happened."""
    status, failure = _status(h)
    if h.forbidden and status != SANDBOX_ERROR:
        then = "" if status in (PASSED, BLOCKED) else f" (then: {status})"
        status, failure = BLOCKED, Failure("Blocked", f"forbidden action attempted: {', '.join(h.forbidden)}{then}",
                                           failure.line if failure else None)
    if failure is not None and h.line and failure.line != h.line:   # check(): quote the test's line
        failure = Failure(failure.type, failure.message, h.line)
    return status, failure


def _status(h: Happened) -> tuple[str, Failure | None]:
    if h.setup_error is not None:
        return SANDBOX_ERROR, Failure("SandboxError", h.setup_error)
    if not h.ready:
        return SANDBOX_ERROR, Failure("SandboxError", "the sandboxed process failed during setup")
    if h.timed_out:
        return TIMEOUT, Failure("Timeout", f"time limit of {h.time_limit_s:g} s exceeded"
                                           + (f" {h.where}" if h.where == "while compiling" else ""))
    if h.run_program:
        return _program(h)
    if h.died:
        return _death(h)
    if h.exc is not None:
        return _raised(h.exc, h.where)
    if h.protocol is not None:
        return ERROR, Failure("ProtocolError", h.protocol)
    if h.rejected is not None:
        return FAILED, h.rejected
    if h.test_failure is not None:
        return FAILED, h.test_failure
    return PASSED, None


def _program(h: Happened) -> tuple[str, Failure | None]:
    st = h.exit_status
    exited = st is not None and os.WIFEXITED(st)
    if exited and os.WEXITSTATUS(st) == 0:
        return PASSED, None
    if h.exc is not None and exited:
        return _raised(h.exc, "", assertion_fails=True)
    if exited:
        return FAILED, Failure("ExitStatus", f"the program exited with code {os.WEXITSTATUS(st)}")
    return _death(h)


def _raised(exc: dict, where: str, assertion_fails: bool = False) -> tuple[str, Failure]:
    """An exception the submission raised (``assertion_fails``: an AssertionError is a failure,
    as for a whole program; in check() the asserts are the test's, in the judge)."""
    name, msg, line = exc["type"], exc["message"], exc.get("line")
    # (No name decides sandbox_error: only the trusted side's own setup does, see setup_error.)
    if name == "MemoryError":
        return MEMORY, Failure("MemoryError", msg or f"the submission ran out of memory {where}".rstrip(), line)
    if name in NON_EXCEPTIONS:
        return ERROR, Failure(name, msg or f"the submission raised {name}", line)
    if assertion_fails and name == "AssertionError":
        return FAILED, Failure(name, msg, line)
    if exc.get("errno") == errno.EPERM:
        return BLOCKED, Failure(name, msg, line)
    return ERROR, Failure(name, msg, line)


def _death(h: Happened) -> tuple[str, Failure]:
    """Why a child vanished while the judge was waiting on it."""
    st = h.exit_status
    during = h.where
    if st is not None and os.WIFEXITED(st) and os.WEXITSTATUS(st) == SETUP_FAILED_CODE and not h.ready:
        return SANDBOX_ERROR, Failure("SandboxError", "the sandboxed process failed during setup")
    if h.oom_killed:
        return MEMORY, Failure("MemoryError", f"the memory limit was reached {during}".rstrip())
    if st is not None and os.WIFSIGNALED(st):
        sig = os.WTERMSIG(st)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and h.cpu_s >= h.cpu_limit_s - 0.5):
            return TIMEOUT, Failure("Timeout", f"CPU time limit reached ({h.cpu_limit_s:g} s) {during}".rstrip())
        if sig == signal.SIGSYS:
            return BLOCKED, Failure("Blocked", f"killed by the seccomp filter {during}".rstrip())
    how = _describe_status(st) if st is not None else "ended"
    return ERROR, Failure("ProcessExited", f"the submission's process {how} {during}".rstrip())


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
