"""Casting the scripted simulated user of a session from the session's own data.

Registered as `scripted` (the default). What the planner matches an assistant's question
against: for a task item, the keypoint's question, plain line and original text; for a
convention item, the dimension's questions and summary, and the item's clarification.
"""

from __future__ import annotations

from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.planner import PlannerItem
from capa_hf.simulator.protocols import register_user
from capa_hf.simulator.scripted_user import ScriptedUser, UserScript


def planner_items(brief: UserBrief) -> tuple[PlannerItem, ...]:
    out = []
    for h in brief.hidden_items:
        kp = brief.keypoints.get(h.keypoint_id) if h.keypoint_id else None
        if h.kind == "convention":
            dim = brief.dimensions[h.dimension]
            out.append(PlannerItem(id=h.id, question=" ".join(q.replace("{result}", "result").replace(
                "{input}", "input") for q in dim.questions), plain=f"{dim.summary} {h.clarification}",
                original_text=kp.original_text if kp else dim.name))
        else:
            out.append(PlannerItem(id=h.id, question=kp.question, plain=kp.plain, original_text=kp.original_text))
    return tuple(out)


def scripted_user(brief: UserBrief) -> ScriptedUser:
    script = UserScript(
        session_id=brief.session_id,
        items=planner_items(brief),
        clarifications={h.id: h.clarification for h in brief.hidden_items},
        failure_reactions=tuple(brief.persona.voice.failure_reactions),
        failing_check=tuple(brief.user_lines["failing_check"]),
        nothing_left=tuple(brief.user_lines["nothing_left"]),
    )
    return ScriptedUser(script)


@register_user("scripted")
def make_scripted_user(brief: UserBrief, **options) -> ScriptedUser:
    if options:
        raise ValueError(f"the scripted user takes no options, got {sorted(options)}")
    return scripted_user(brief)


