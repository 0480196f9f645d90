"""The LLM user's expression agent: what it is shown, and how its message is cleaned. Pure.

It sees the persona profile, the user's own earlier messages (as commitments it must not
contradict), the assistant's last reply, and what to convey this turn: the planner's focus's
clarification, the failing check, or that nothing is left (`convey_text`). It never sees the
reference or any hidden item other than the focus. Its messages are then checked (fidelity.py).
"""

from __future__ import annotations

from typing import Sequence

from capa_hf.prompts import fill, prompt_text
from capa_hf.schema import Persona
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.planner import Plan
from capa_hf.simulator.verdicts import failing_line, failure_summary

MAX_MESSAGE_CHARS = 1500        # a long assistant message (code) is cut in an agent's view


def persona_profile(persona: Persona) -> str:
    t = persona.traits
    return "\n".join([f"Person: {persona.name}. {' '.join(persona.summary.split())}",
                      f"Expertise: {t.expertise}", f"Background: {t.background}", f"Tone: {t.tone}",
                      f"Length of your messages: {t.verbosity}", f"Mood: {t.emotional_state}",
                      f"When code fails: {' '.join(t.failure_style.split())}"])


def shorten(text: str, n: int = MAX_MESSAGE_CHARS) -> str:
    """A long message (code) cut for an agent's view."""
    return text if len(text) <= n else text[:n] + " [...]"


def convey_text(brief: UserBrief, plan: Plan, verdict: dict | None) -> str:
    """What the expression agent must get across this turn."""
    failed = verdict is not None and verdict.get("status") != "passed"
    reaction = fill("llm_user_convey_failure", error=failure_summary(verdict)) if failed else ""
    if plan.kind == "item":
        clar = next(h.clarification for h in brief.hidden_items if h.id == plan.item_id)
        text = fill("llm_user_convey_item", reaction=reaction, clarification=clar)
    elif plan.kind == "failing_check":
        text = fill("llm_user_convey_failing", reaction=reaction, line=failing_line(verdict) or "")
    else:
        text = fill("llm_user_convey_nothing", reaction=reaction)
    return text.strip()


def expression_messages(brief: UserBrief, assistant_reply: str, said: Sequence[str], convey: str) -> list[dict]:
    earlier = "\n".join(f"{i}. {m}" for i, m in enumerate(said, 1)) or "(nothing yet)"
    turn = fill("llm_user_expression_turn", assistant=shorten(assistant_reply.strip()) or "(empty)",
                earlier=earlier, convey=convey)
    return [{"role": "system", "content": fill("llm_user_expression", profile=persona_profile(brief.persona))},
            {"role": "user", "content": turn}]


INSTRUCTION_PROMPTS = ("llm_user_expression", "llm_user_expression_turn", "llm_user_convey_item",
                       "llm_user_convey_failing", "llm_user_convey_nothing", "llm_user_convey_failure",
                       "llm_user_expression_retry")


def instruction_texts() -> list[str]:
    """The expression agent's fixed instructions (a message must not parrot them)."""
    return [prompt_text(name) for name in INSTRUCTION_PROMPTS]


def clean_message(text: str) -> str:
    """The message as a user would send it: no surrounding quotes or a leading role label."""
    s = (text or "").strip()
    for label in ("user:", "me:", "message:", "my message:", "next message:", "you:"):
        if s.lower().startswith(label):
            s = s[len(label):].strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        s = s[1:-1].strip()
    return s
