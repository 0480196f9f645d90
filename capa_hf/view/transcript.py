"""One session record as the viewer shows it: a chat with each turn's kind, each submission with
how it was extracted and its verdict, and the hidden items marked where the user revealed them.
"""

from __future__ import annotations

ERROR_CHARS = 600        # an engine error's text, shortened for the list


def _failure(verdict: dict | None) -> dict | None:
    failure = (verdict or {}).get("failure")
    if not failure:
        return None
    return {"type": failure.get("type"), "message": (failure.get("message") or "").strip(),
            "line": (failure.get("line") or "").strip() or None}


def submission_view(sub: dict) -> dict:
    """A submission: its code, the extraction facts the record holds (every key besides the code
    and the verdict: the binding, the dropped statements, the rule that fired when recorded),
    and the verdict with its failing check."""
    verdict = sub.get("verdict") or {}
    veto = verdict.get("veto") or {}
    extraction = {k: v for k, v in sub.items() if k not in ("turn", "code", "verdict") and v not in (None, [], "")}
    return {"code": sub.get("code", ""), "extraction": extraction, "status": verdict.get("status", "?"),
            "sandbox_status": verdict.get("sandbox_status"),
            "veto": veto.get("reason") if veto.get("vetoed") else None,
            "failure": _failure(verdict)}


def reveal_turns(record: dict, hidden: list[dict]) -> dict[int, list[str]]:
    """{assistant turn: [item ids the user's answer to that turn revealed]}. An LLM user's log
    names its planner's focus per turn; the scripted user's answer holds the clarification
    verbatim."""
    turns = record.get("turns") or []
    focus = {}
    for entry in record.get("user_log") or []:
        planner = entry.get("planner") if isinstance(entry, dict) else None
        if isinstance(planner, dict) and planner.get("focus"):
            focus[entry.get("turn")] = planner["focus"]
    out: dict[int, list[str]] = {}
    seen: set[str] = set()
    for t in range(1, (len(turns) + 1) // 2):
        reply = turns[2 * t]["content"] if 2 * t < len(turns) else ""
        ids = [h["id"] for h in hidden if h["id"] not in seen
               and (focus.get(t) == h["id"] or (h.get("clarification") and h["clarification"] in reply))]
        if ids:
            out[t] = ids
            seen.update(ids)
    return out


def chat(record: dict, reveals: dict[int, list[str]]) -> list[dict]:
    """The transcript as messages: the request (turn 0), then each assistant turn with its kind
    and submission, and the user's answer to it with the items it revealed."""
    kinds = record.get("turn_kinds") or []
    subs = {s.get("turn"): s for s in record.get("submissions") or []}
    out = []
    for i, msg in enumerate(record.get("turns") or []):
        turn = (i + 1) // 2
        entry = {"role": msg.get("role", "?"), "text": msg.get("content", ""), "turn": turn}
        if entry["role"] == "assistant":
            entry["kind"] = kinds[turn - 1] if turn - 1 < len(kinds) else "?"
            if turn in subs:
                entry["submission"] = submission_view(subs[turn])
        elif turn in reveals:
            entry["reveals"] = reveals[turn]
        out.append(entry)
    return out


def _error(record: dict) -> str | None:
    err = record.get("error")
    if not err:
        return None
    text = str(err.get("error") if isinstance(err, dict) else err).strip()
    return text.splitlines()[-1][:ERROR_CHARS] if text else "engine error"


def session_view(record: dict, run: int, hidden: list[dict]) -> dict:
    """Everything the list and the chat of one (run, session, trial) need."""
    reveals = reveal_turns(record, hidden)
    revealed_at = {i: t for t, ids in reveals.items() for i in ids}
    usage = record.get("usage") or []
    return {
        "run": run, "key": f"{record.get('session_id')}#{record.get('trial', 0)}",
        "session_id": record.get("session_id"), "trial": record.get("trial", 0),
        "cell": record.get("cell_id"), "persona": record.get("persona_id"),
        "mechanisms": list(record.get("mechanisms") or []), "task": record.get("task_id"),
        "role": record.get("role"), "condition": record.get("condition"),
        "item_kinds": list(record.get("item_kinds") or []), "fully_resolvable": record.get("fully_resolvable"),
        "solved": bool(record.get("solved")), "success_turn": record.get("success_turn"),
        "turns": record.get("assistant_turns", len(record.get("turn_kinds") or [])),
        "incomplete": bool(record.get("incomplete")), "error": _error(record),
        "context": record.get("context_sha256"), "context_sources": list(record.get("context_sources") or []),
        "completion_tokens": sum(int(u.get("completion_tokens") or 0) for u in usage),
        "hidden": [{**h, "revealed_turn": revealed_at.get(h["id"])} for h in hidden],
        "chat": chat(record, reveals),
    }
