"""One session record as the viewer shows it: a chat with each turn's kind, each submission with
how it was extracted and its verdict, and the hidden items marked where the user revealed them.
"""

from __future__ import annotations

from capa_hf.schema.record import SessionRecord, SubmissionRecord, Verdict

ERROR_CHARS = 600        # an engine error's text, shortened for the list


def _failure(verdict: Verdict) -> dict | None:
    failure = verdict.failure
    if failure is None:
        return None
    return {"type": failure.type, "message": failure.message.strip(), "line": (failure.line or "").strip() or None}


def submission_view(sub: SubmissionRecord) -> dict:
    """A submission: its code, the extraction facts the record holds (every field besides the code
    and the verdict: the binding, the dropped statements, the rule that fired when recorded),
    and the verdict with its failing check."""
    verdict = sub.verdict
    veto = verdict.veto
    extraction = {k: v for k, v in sub.to_dict().items() if k not in ("turn", "code", "verdict")
                  and v not in (None, [], "")}
    return {"code": sub.code, "extraction": extraction, "status": verdict.status,
            "sandbox_status": verdict.sandbox_status,
            "veto": veto.reason if veto is not None and veto.vetoed else None,
            "failure": _failure(verdict)}


def reveal_turns(record: SessionRecord, hidden: list[dict]) -> dict[int, list[str]]:
    """{assistant turn: [item ids the user's answer to that turn revealed]}. An LLM user's log
    names its planner's focus per turn; the scripted user's answer holds the clarification
    verbatim."""
    turns = record.turns
    focus = {}
    for entry in record.user_log:
        planner = entry.get("planner")
        if isinstance(planner, dict) and planner.get("focus"):
            focus[entry.get("turn")] = planner["focus"]
    out: dict[int, list[str]] = {}
    seen: set[str] = set()
    for t in range(1, (len(turns) + 1) // 2):
        reply = turns[2 * t].content if 2 * t < len(turns) else ""
        ids = [h["id"] for h in hidden if h["id"] not in seen
               and (focus.get(t) == h["id"] or (h.get("clarification") and h["clarification"] in reply))]
        if ids:
            out[t] = ids
            seen.update(ids)
    return out


def chat(record: SessionRecord, reveals: dict[int, list[str]]) -> list[dict]:
    """The transcript as messages: the request (turn 0), then each assistant turn with its kind
    and submission, and the user's answer to it with the items it revealed."""
    kinds = record.turn_kinds
    subs = {s.turn: s for s in record.submissions}
    out = []
    for i, msg in enumerate(record.turns):
        turn = (i + 1) // 2
        entry = {"role": msg.role, "text": msg.content, "turn": turn}
        if entry["role"] == "assistant":
            entry["kind"] = kinds[turn - 1] if turn - 1 < len(kinds) else "?"
            if turn in subs:
                entry["submission"] = submission_view(subs[turn])
        elif turn in reveals:
            entry["reveals"] = reveals[turn]
        out.append(entry)
    return out


def _error(record: SessionRecord) -> str | None:
    if not record.error:
        return None
    text = record.error_text().strip()
    return text.splitlines()[-1][:ERROR_CHARS] if text else "engine error"


def session_view(record: SessionRecord, run: int, hidden: list[dict]) -> dict:
    """Everything the list and the chat of one (run, session, trial) need."""
    reveals = reveal_turns(record, hidden)
    revealed_at = {i: t for t, ids in reveals.items() for i in ids}
    played = record.assistant_turns if "assistant_turns" in record.model_fields_set else len(record.turn_kinds)
    return {
        "run": run, "key": record.key,
        "session_id": record.session_id, "trial": record.trial,
        "cell": record.cell_id, "persona": record.persona_id,
        "mechanisms": list(record.mechanisms), "task": record.task_id,
        "role": record.role, "condition": record.condition,
        "item_kinds": list(record.item_kinds), "fully_resolvable": record.fully_resolvable,
        "solved": record.solved, "success_turn": record.success_turn,
        "turns": played,
        "incomplete": record.incomplete, "error": _error(record),
        "context": record.context_sha256, "context_sources": list(record.context_sources),
        "completion_tokens": sum(u.completion_tokens for u in record.usage),
        "hidden": [{**h, "revealed_turn": revealed_at.get(h["id"])} for h in hidden],
        "chat": chat(record, reveals),
    }
