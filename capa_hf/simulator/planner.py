"""The clarification planner of the scripted user: which ONE thing to reveal next."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from capa_hf.simulator.similarity import similarity

MATCH_THRESHOLD = 0.18


@dataclass(frozen=True)
class PlannerItem:
    """What the planner knows about a hidden item: its priority order and its matching texts."""

    id: str
    question: str
    plain: str
    original_text: str

    def match_text(self) -> str:
        return f"{self.question} {self.plain} {self.original_text}"


@dataclass(frozen=True)
class Plan:
    kind: str            # "item" | "failing_check" | "nothing_left"
    item_id: str | None = None
    score: float = 0.0
    reason: str = ""


def plan_next(
    items: Sequence[PlannerItem],
    revealed: frozenset[str],
    assistant_reply: str,
    after_failure: bool,
    has_failing_line: bool,
) -> Plan:
    """Pure: pick the item that best matches a question, else the next by priority."""
    pending = [it for it in items if it.id not in revealed]
    if not pending:
        return Plan("failing_check" if after_failure and has_failing_line else "nothing_left",
                    reason="every hidden item is already revealed")
    if not after_failure:
        scored = [(similarity(assistant_reply, it.match_text()), -i, it) for i, it in enumerate(pending)]
        score, _, best = max(scored, key=lambda s: (s[0], s[1]))
        if score >= MATCH_THRESHOLD:
            return Plan("item", best.id, score, reason="best lexical match to the question")
    return Plan("item", pending[0].id, 0.0,
                reason="after a failed submission" if after_failure else "no item matches the question")
