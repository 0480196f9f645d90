"""The scripted simulated user: deterministic, free, and faithful to its hidden items.

Planner (planner.py) decides WHAT to reveal: one hidden item per turn. Expression (here) decides
HOW: the item's clarification, already written in the persona's voice by Stage 1, preceded after
a failed submission by the persona's reaction to failure. Once every item is out, the user quotes
the failing check from the sandbox verdict. It never sends code, never sends the same message
twice, and never takes back what it said: each item is revealed at most once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Generator, Sequence

from capa_hf.simulator.planner import Plan, PlannerItem, plan_next
from capa_hf.simulator.verdicts import failing_line, failure_summary


@dataclass(frozen=True)
class UserScript:
    """Everything the scripted user may say in one session."""

    session_id: str
    items: tuple[PlannerItem, ...]                 # hidden items in priority order
    clarifications: dict[str, str]                 # item id -> clarification in persona voice
    failure_reactions: tuple[str, ...]             # persona templates, may hold {error}
    failing_check: tuple[str, ...]                 # templates holding {line}
    nothing_left: tuple[str, ...]


def _offset(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n if n else 0


@dataclass
class ScriptedUser:
    script: UserScript
    revealed: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    name: str = "scripted"

    def _rotate(self, templates: Sequence[str], key: str, **slots) -> str:
        n = len(templates)
        start = _offset(f"{self.script.session_id}/{key}", n)
        options = [templates[(start + i) % n].format(**slots) for i in range(n)]
        for text in options:
            if all(text not in s for s in self.said):
                return text
        return options[len(self.said) % n]

    def respond(self, assistant_reply: str, verdict: dict | None) -> Generator[object, object, str]:
        """The next user message. A generator so that an LLM user can yield model calls here."""
        after_failure = verdict is not None and verdict.get("status") != "passed"
        line = failing_line(verdict)
        plan = plan_next(self.script.items, frozenset(self.revealed), assistant_reply,
                         after_failure=after_failure, has_failing_line=line is not None)
        self.plans.append(plan)
        if plan.kind == "item":
            self.revealed.append(plan.item_id)
        message = self.express(plan, verdict)
        self.said.append(message)
        return message
        yield  # pragma: no cover - makes this a generator without yielding

    def express(self, plan: Plan, verdict: dict | None) -> str:
        """The scripted wording of one plan (also what an LLM user falls back to)."""
        after_failure = verdict is not None and verdict.get("status") != "passed"
        parts = []
        if after_failure:
            parts.append(self._rotate(self.script.failure_reactions, "reaction",
                                      error=failure_summary(verdict)))
        if plan.kind == "item":
            parts.append(self.script.clarifications[plan.item_id])
        elif plan.kind == "failing_check":
            parts.append(self._rotate(self.script.failing_check, "check", line=failing_line(verdict)))
        else:
            parts.append(self._rotate(self.script.nothing_left, "nothing"))
        message = " ".join(p.strip() for p in parts if p.strip())
        if message in self.said:  # last resort; keeps the promise never to repeat a message
            message = f"{message} (turn {len(self.said) + 2})"
        return message
