"""Helpers for the LLM-path tests: drive a generator by hand, tell the LLM user's two agents apart."""

from __future__ import annotations

import json

from runners.types import ChatResult

from capa_hf.content import load_user_lines
from capa_hf.prompts import prompt_text
from capa_hf.simulator.brief import UserBrief

SESSION = "C01-S06"          # the first held-out session of cell C01 (the evaluation tests play C01)
USER_SESSION = "C20-S08"     # HumanEval/40 (triples_sum_to_zero): two task items and a convention item


def drive(gen, answer):
    """Run a generator that yields Calls; `answer(call)` gives each reply's text (or a ChatResult)."""
    calls = []
    try:
        call = next(gen)
        while True:
            calls.append(call)
            reply = answer(call)
            call = gen.send(reply if isinstance(reply, ChatResult) else ChatResult(text=reply, finish_reason="stop"))
    except StopIteration as stop:
        return stop.value, calls


def is_planner(messages) -> bool:
    first = messages[0]
    content = first["content"] if isinstance(first, dict) else first[1]
    return content == prompt_text("llm_user_planner")


def plan_json(focus, need=True, rationale="the assistant asked about it") -> str:
    return json.dumps({"clarification_needed": need, "focus": focus, "rationale": rationale})


def session_brief(data, session_id: str = USER_SESSION) -> UserBrief:
    from capa_hf.evaluation.capa_source import brief

    return brief(data.heldout[session_id], data, load_user_lines())
