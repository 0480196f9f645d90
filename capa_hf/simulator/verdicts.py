"""Small helpers over sandbox verdicts, as plain dicts (what a run's JSONL stores)."""

from __future__ import annotations


def failing_line(verdict: dict | None) -> str | None:
    failure = (verdict or {}).get("failure") or {}
    line = failure.get("line")
    return line.strip() if line else None


def failure_summary(verdict: dict | None) -> str:
    """One line a user could paste: what failed and where."""
    if not verdict:
        return "it did not run"
    failure = verdict.get("failure") or {}
    status = verdict.get("status", "failed")
    kind = failure.get("type") or status
    line = failing_line(verdict)
    msg = (failure.get("message") or "").strip().splitlines()
    detail = f": {msg[0][:120]}" if msg and msg[0] else ""
    if line:
        return f"{kind} at `{line[:160]}`"
    return f"{kind}{detail}" if detail else str(kind)


def verdict_kind(verdict: dict | None) -> str | None:
    """What kind of failure a verdict is, for the user's reaction: `assertion` (a check got
    another result), `error` (the code raised), `timeout`, `memory` or `blocked`; None when it
    passed or nothing ran."""
    if not verdict or verdict.get("status") == "passed":
        return None
    status = verdict.get("status")
    if status == "failed":
        return "assertion"
    return status if status in ("timeout", "memory", "blocked") else "error"


def failure_slots(verdict: dict | None) -> dict:
    """The slots a `what_happened` line may use: {line}, {exception}, {message}."""
    failure = (verdict or {}).get("failure") or {}
    msg = (failure.get("message") or "").strip().splitlines()
    return {"line": (failing_line(verdict) or "")[:160], "exception": failure.get("type") or "an exception",
            "message": (msg[0][:120] if msg else "") or "no message"}
