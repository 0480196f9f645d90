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
