"""The submission as the trusted test sees it: proxy functions, and its exceptions rebuilt.

Everything here handles values from the sandboxed child in the trusted judge: names and
messages are cleaned and capped, formatting never raises (``safe_str``), and nothing from
the child can end a loop of the test's own by surprise (``StopIteration`` is re-raised as
a ``RuntimeError``, as PEP 479 does for generators).
"""
from __future__ import annotations

import builtins

from .outcome import NON_EXCEPTIONS


class Abort(BaseException):
    """Stops the trusted test run at once (a test's ``except Exception`` cannot swallow it).

    Carries what happened, as ``outcome.Happened`` fields (``exc=...``, ``timed_out=True``, ...).
    """

    def __init__(self, **happened):
        super().__init__(", ".join(happened))
        self.happened = happened


class RemoteError(Exception):
    """Base of exceptions re-raised on behalf of the submission."""
    remote: dict = {}


class SubmissionStopIteration(RuntimeError, RemoteError):
    """The submission raised StopIteration (or StopAsyncIteration): re-raised in the test as a
    RuntimeError, so that it cannot end the test's own ``map``/``zip``/``all``/``for`` early."""


def safe_str(value, limit: int = 2000) -> str:
    """``str(value)``, capped, for a value that may come from the submission: never raises
    (``str`` of an int of 5000 digits does; so can a deeply nested list)."""
    try:
        s = str(value)
        if type(s) is not str:
            raise TypeError
    except BaseException as e:  # ValueError, RecursionError, MemoryError, ...
        return f"<{type(value).__name__} value that cannot be shown ({type(e).__name__})>"
    return s[:limit]


def clean_info(info) -> dict:
    """An exception record from the child, with every field checked and capped."""
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
    # whether it is an Exception (the child says; its own report otherwise defaults to yes)
    exception = info.get("exception") is not False
    return {"type": name, "message": msg, "errno": eno, "line": line, "lineno": lineno, "exception": exception}


_remote_classes: dict[str, type] = {}


def remote_exception(info: dict) -> BaseException:
    """The exception to raise in the test for what the submission raised (a cleaned record)."""
    name = info["type"]
    msg = info["message"]
    if name in NON_EXCEPTIONS or name == "MemoryError" or not info.get("exception", True):
        return Abort(exc=info)   # (a BaseException that is not an Exception: no `except Exception` may catch it)
    if name in ("StopIteration", "StopAsyncIteration"):
        e = SubmissionStopIteration(f"the submission raised {name}" + (f": {msg}" if msg else ""))
        e.remote = info
        return e
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

    def __init__(self, judge, name: str):
        self._judge = judge
        self._name = name
        self.__name__ = name

    def __repr__(self) -> str:
        return f"<sandboxed function {self._name}>"

    def __call__(self, *args, **kwargs):
        return self._judge.remote_call(self._name, args, kwargs)
