"""Casting the scripted simulated user of a session from the session's own data.

Registered as `scripted` (the default). What the planner matches an assistant's question
against: for a task item, the keypoint's question, plain line, description and original text,
the phrase the request used instead, and the question forms its misreading implies (cues); for
a convention item, the dimension's summary, questions and cues (question_vocab.yaml), the
item's clarification and its keypoint's texts. After a failed submission, the variant's failure
ties (which hidden items each failing test line tells apart) decide what is revealed.
"""

from __future__ import annotations

from capa_hf.schema import Keypoint
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.planner import PlannerItem
from capa_hf.simulator.protocols import register_user
from capa_hf.simulator.scripted_user import ScriptedUser, UserScript
from capa_hf.simulator.user_data import keypoint_questions, question_vocab


def _kp_texts(kp: Keypoint | None) -> tuple[str, ...]:
    return (kp.question, kp.plain, kp.description, kp.original_text) if kp else ()


def planner_items(brief: UserBrief) -> tuple[PlannerItem, ...]:
    _, dim_cues, category_cues = question_vocab()
    out = []
    for h in brief.hidden_items:
        kp = brief.keypoints.get(h.keypoint_id) if h.keypoint_id else None
        kp_forms = keypoint_questions(brief.task_id, kp.id) if kp else ()
        if h.kind == "convention":
            dim = brief.dimensions[h.dimension]
            questions = " ".join(q.replace("{result}", "result").replace("{input}", "input") for q in dim.questions)
            out.append(PlannerItem(id=h.id, question=questions, plain=f"{dim.summary} {h.clarification}",
                                   original_text=dim.name, cues=tuple(dim_cues.get(h.dimension, ())),
                                   texts=(*_kp_texts(kp), *kp_forms, h.obscured_as),
                                   refs=(h.dimension,) + ((kp.id,) if kp else ()), convention=True))
        else:
            out.append(PlannerItem(id=h.id, question=kp.question, plain=kp.plain, original_text=kp.original_text,
                                   cues=kp_forms + category_cues.get(kp.category, ()),
                                   texts=(kp.description, h.obscured_as, h.clarification),
                                   refs=(kp.id,)))
    return tuple(out)


def concessions(hidden_items, by_mechanism) -> dict:
    """Item id -> (cue phrases, reply lines) for the items whose mechanism has concessions."""
    return {h.id: (tuple(by_mechanism[h.mechanism]["cue"]), tuple(by_mechanism[h.mechanism]["lines"]))
            for h in hidden_items if h.mechanism in by_mechanism}


def scripted_user(brief: UserBrief) -> ScriptedUser:
    vocab = question_vocab()[0]
    lines = brief.user_lines
    persona_id = brief.persona.id if brief.persona is not None else None
    fit = {r["text"]: tuple(r["kinds"]) for r in (lines.get("reaction_fit") or {}).get(persona_id, ())}
    script = UserScript(
        session_id=brief.session_id,
        items=planner_items(brief),
        clarifications={h.id: h.clarification for h in brief.hidden_items},
        failure_reactions=tuple(brief.persona.voice.failure_reactions),
        failing_check=tuple(lines["failing_check"]),
        nothing_left=tuple(lines["nothing_left"]),
        vocab=vocab,
        ties=dict(brief.failure_ties()),
        reaction_fit=fit,
        what_happened={k: tuple(v) for k, v in (lines.get("what_happened") or {}).items()},
        what_happened_subject={k: tuple(v) for k, v in (lines.get("what_happened_subject") or {}).items()},
        neutral_reactions={k: tuple(v) for k, v in (lines.get("reactions") or {}).items()},
        stated=brief.stated_conventions(),
        restate=tuple(lines.get("restate") or ()),
        concessions=concessions(brief.hidden_items, lines.get("concessions") or {}),
        wraps=tuple(brief.persona.voice.clarification_wraps),
    )
    return ScriptedUser(script)


@register_user("scripted")
def make_scripted_user(brief: UserBrief, **options) -> ScriptedUser:
    if options:
        raise ValueError(f"the scripted user takes no options, got {sorted(options)}")
    return scripted_user(brief)
