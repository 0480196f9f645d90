"""The LLM user's planner: what it is shown, and how its answer is checked. Pure.

The planner sees the ground truth (task, the variant's reference, every hidden item with its
clarification and whether it was said) and the conversation, and answers
`{"clarification_needed": bool, "focus": <hidden item id> | "failing_test" | null, "rationale": str}`.
What the expression agent is shown is in expression.py.
"""

from __future__ import annotations

from typing import Sequence

from capa_hf.prompts import fill, prompt_text
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.expression import shorten
from capa_hf.simulator.planner import Plan
from capa_hf.simulator.verdicts import failing_line, failure_summary

FAILING_TEST = "failing_test"


def render_conversation(dialogue: Sequence[dict]) -> str:
    return "\n\n".join(f"{m['role'].upper()}: {shorten(m['content'])}" for m in dialogue) or "(nothing yet)"


def test_result(verdict: dict | None) -> str:
    if verdict is None:
        return "it held no code, so nothing ran"
    if verdict.get("status") == "passed":
        return "its code passed the tests"
    line = failing_line(verdict)
    return f"its code failed the tests: {failure_summary(verdict)}" + (f" (failing check: {line})" if line else "")


def allowed_focus(brief: UserBrief, verdict: dict | None) -> list[str]:
    """The planner's legal focus values, null aside."""
    out = [h.id for h in brief.hidden_items]
    if failing_line(verdict) is not None:
        out.append(FAILING_TEST)
    return out


def planner_messages(brief: UserBrief, dialogue: Sequence[dict], revealed: Sequence[str],
                     verdict: dict | None) -> list[dict]:
    items = "\n".join(
        f"- {h.id} ({h.kind} item, {'already said' if h.id in revealed else 'not said yet'}): {h.clarification}"
        for h in brief.hidden_items)
    allowed = ", ".join(f'"{a}"' for a in allowed_focus(brief, verdict)) + ", or null"
    turn = fill("llm_user_planner_turn", task=brief.task_prompt.strip() or "(not given)",
                reference=brief.reference.strip() or "(not given)", items=items,
                conversation=render_conversation(dialogue), test_result=test_result(verdict), allowed=allowed)
    return [{"role": "system", "content": prompt_text("llm_user_planner")}, {"role": "user", "content": turn}]


def validate_plan(value: dict, allowed: Sequence[str]) -> str | None:
    """None when the planner's answer is usable, else what is wrong with it. A valid focus is
    used even when clarification_needed says false (the focus is what the planner chose);
    null is usable only with clarification_needed false."""
    need = value.get("clarification_needed")
    if not isinstance(need, bool):
        return f'"clarification_needed" must be true or false, got {need!r}'
    if "focus" not in value:
        return 'the object has no "focus" field'
    focus = value["focus"]
    if focus is None and need:
        return '"focus" is null although clarification_needed is true: name one of ' + ", ".join(allowed)
    if focus is not None and focus not in allowed:
        return f'"focus" must be one of {", ".join(allowed)} (or null with clarification_needed false), got {focus!r}'
    rationale = value.get("rationale", "")
    return None if isinstance(rationale, str) else f'"rationale" must be a string, got {rationale!r}'


def plan_of(value: dict) -> Plan:
    """The planner's (validated) answer as a Plan like the scripted planner's."""
    focus = value.get("focus")
    reason = str(value.get("rationale", ""))[:300]
    if focus is None:
        return Plan("nothing_left", reason=reason)
    if focus == FAILING_TEST:
        return Plan("failing_check", reason=reason)
    return Plan("item", focus, reason=reason)


def focus_of(plan: Plan) -> str | None:
    return plan.item_id if plan.kind == "item" else (FAILING_TEST if plan.kind == "failing_check" else None)
