"""The structured result of one sandboxed execution."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import JOB_LIMITS

PASSED = "passed"
FAILED = "failed"
ERROR = "error"
TIMEOUT = "timeout"
MEMORY = "memory"
BLOCKED = "blocked"
SANDBOX_ERROR = "sandbox_error"

STATUSES = (PASSED, FAILED, ERROR, TIMEOUT, MEMORY, BLOCKED, SANDBOX_ERROR)


def clean_text(s: str) -> str:
    """``s`` with every lone surrogate replaced by U+FFFD, so that it encodes as UTF-8.

    (Text from a submission can hold them: an exception message, a forbidden action's name.)
    """
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass(frozen=True)
class Failure:
    """Why a submission did not pass.

    ``type`` is an exception type name (``AssertionError``, ``ZeroDivisionError``)
    or a sandbox category (``Timeout``, ``Blocked``, ``SandboxError`` ...).
    ``line`` is the test's source line that failed (for ``check``), or the
    program line that raised (for ``run``), when known.
    """

    type: str
    message: str
    line: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", clean_text(self.type))
        object.__setattr__(self, "message", clean_text(self.message))
        if self.line is not None:
            object.__setattr__(self, "line", clean_text(self.line))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "line": self.line}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Failure":
        return cls(type=str(d["type"]), message=str(d["message"]), line=d.get("line"))


@dataclass
class Verdict:
    status: str
    failure: Failure | None = None
    stdout: str = ""
    stderr: str = ""
    wall_s: float = 0.0
    # Which isolation layers were active for this execution (name -> bool).
    layers: dict[str, bool] = field(default_factory=dict)
    # With ``record_calls=True``: every call the test made of the entry point, in order, as
    # ``{"args": [...], "kwargs": {...}, "value": ...}``, ``{..., "raised": {"type", "message"}}`` or
    # (a value the judge refused to rebuild) ``{..., "refused": {"type", "message"}}``, with args,
    # kwargs and value in plaindata's wire form (see ``decoded_calls``).
    calls: list[dict] | None = None
    # Where the sandbox ran with less than its full protection for this execution, what and why
    # (e.g. memory enforced by RLIMIT_AS only, without a memory cgroup).
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown verdict status {self.status!r}")
        self.stdout = clean_text(self.stdout)
        self.stderr = clean_text(self.stderr)
        self.notes = [clean_text(n) for n in self.notes]

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def to_dict(self) -> dict[str, Any]:
        d = {
            "status": self.status,
            "failure": self.failure.to_dict() if self.failure else None,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "wall_s": self.wall_s,
            "layers": dict(self.layers),
        }
        if self.calls is not None:
            d["calls"] = self.calls
        if self.notes:
            d["notes"] = list(self.notes)
        return d

    def decoded_calls(self, timeout_s: float | None = JOB_LIMITS.timeout_s) -> list[dict]:
        """The recorded calls with args, kwargs and values decoded to Python objects.

        Decoded under the judge's own limits (no hash flooding; at most ``timeout_s`` seconds,
        else ``plaindata.DecodeTimeout``), since the values came from the submission. A value
        the judge refused is ``{"refused": {"type", "message"}}``, as recorded."""
        import time

        from . import plaindata

        limit = plaindata.DecodeLimit(None if timeout_s is None else time.monotonic() + timeout_s)
        out = []
        for c in self.calls or []:
            d = {"args": tuple(plaindata.decode(c["args"], limit)), "kwargs": plaindata.decode(c["kwargs"], limit)}
            if "value" in c:
                d["value"] = plaindata.decode(c["value"], limit)
            elif "refused" in c:
                d["refused"] = dict(c["refused"])
            else:
                d["raised"] = dict(c["raised"])
            out.append(d)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Verdict":
        f = d.get("failure")
        return cls(
            status=d["status"],
            failure=Failure.from_dict(f) if f else None,
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            wall_s=float(d.get("wall_s", 0.0)),
            layers={str(k): bool(v) for k, v in (d.get("layers") or {}).items()},
            calls=d.get("calls"),
            notes=[str(n) for n in d.get("notes") or []],
        )

    @classmethod
    def sandbox_error(cls, message: str, wall_s: float = 0.0) -> "Verdict":
        return cls(status=SANDBOX_ERROR, failure=Failure("SandboxError", message), wall_s=wall_s)
