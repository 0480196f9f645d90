"""The scripted simulated user: deterministic, free, and faithful to its hidden items.

Planner (planner.py) decides WHAT to reveal: the hidden item the question is about (and, for a
question in several parts, the item each other part is about), or after a failed submission the one the failing check tells apart. Expression (here)
decides HOW: the item's clarification, already written in the persona's voice by Stage 1,
preceded after a failed submission by the persona's reaction to that kind of failure (an
assertion never gets a line about the interpreter; a timeout is spoken of as slowness). When no
hidden item is tied to the failing check, or every item is out, the user quotes the failing
check. A reply to an assistant move ("right, you can't see my machine") comes only right after
the assistant made it. It never sends code, never sends the same message twice, and never takes back what it
said: each item is revealed at most once. `log` says, turn by turn, why it chose what it said.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Generator, Iterable, Mapping, Sequence

from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.planner import Plan, PlannerItem, plan_next
from capa_hf.simulator.question_match import Vocabulary
from capa_hf.simulator.reply_lines import (end_sentence, fill_error, join_answers, made_move, slot_role, strip_wrap,
                                           wrap_pieces)
from capa_hf.simulator.value_signature import expected_signature
from capa_hf.simulator.verdicts import failing_line, failure_slots, failure_summary, verdict_kind

SLOT_KINDS = ("timeout", "memory", "blocked")   # only a reaction with the {error} slot says what happened


@dataclass(frozen=True)
class UserScript:
    """Everything the scripted user may say in one session."""

    session_id: str
    items: tuple[PlannerItem, ...]                 # hidden items in priority order
    clarifications: dict[str, str]                 # item id -> clarification in persona voice
    failure_reactions: tuple[str, ...]             # persona templates, may hold {error}
    failing_check: tuple[str, ...]                 # templates holding {line}
    nothing_left: tuple[str, ...]
    vocab: Vocabulary = field(default_factory=Vocabulary)
    ties: Mapping[str, Mapping[str, list]] = field(default_factory=dict)  # line -> ref -> signature
    reaction_fit: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # reaction -> kinds it fits
    what_happened: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> {error} texts
    what_happened_subject: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # noun-phrase forms
    neutral_reactions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> reactions
    stated: Mapping[str, str] = field(default_factory=dict)   # dimension the request stated -> its line
    restate: tuple[str, ...] = ()                              # templates holding {text}
    # item id -> (cue phrases, reply lines): a reply to an assistant move, said before that item's
    # answer only when the assistant's turn just before made the move (reply_lines.made_move)
    concessions: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    wraps: tuple[str, ...] = ()     # the persona's clarification wraps: their lead-ins and tags are said once

    def reactions_for(self, kind: str) -> tuple[str, ...]:
        def fits(r: str) -> bool:
            if r in self.reaction_fit:
                return kind in self.reaction_fit[r]
            return "{error}" in r if kind in SLOT_KINDS else True
        out = tuple(r for r in self.failure_reactions if fits(r))
        return out or self.neutral_reactions.get(kind) or self.failure_reactions


def _offset(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n if n else 0


@dataclass
class ScriptedUser:
    script: UserScript
    revealed: list[str] = field(default_factory=list)
    said: list[str] = field(default_factory=list)
    plans: list[Plan] = field(default_factory=list)
    log: list[dict] = field(default_factory=list)
    restated: list[str] = field(default_factory=list)    # stated conventions pointed out again
    used_templates: list[str] = field(default_factory=list)  # templates said this session (reactions, quotes)
    name: str = "scripted"

    def _rotate(self, templates: Sequence[str], key: str, **slots) -> str:
        """The first of the templates, from a seeded start, whose text was not said yet, a
        template not used yet in the session first (a second failing check is quoted in other words)."""
        n = len(templates)
        start = _offset(f"{self.script.session_id}/{key}", n)
        order = [templates[(start + i) % n] for i in range(n)]
        fresh = [t for t in order if all(t.format(**slots) not in s for s in self.said)]
        chosen = next((t for t in fresh if t not in self.used_templates), fresh[0] if fresh else None)
        if chosen is None:
            return order[len(self.said) % n].format(**slots)
        self.used_templates.append(chosen)
        return chosen.format(**slots)

    def plan(self, assistant_reply: str, verdict: dict | None) -> tuple[Plan, dict]:
        """The plan for this turn and the log entry that says why."""
        after_failure = verdict is not None and verdict.get("status") != "passed"
        line = failing_line(verdict)
        tied = dict(self.script.ties.get(line) or {}) if after_failure and line else {}
        got = (verdict or {}).get("failing_value")
        plan = plan_next(self.script.items, frozenset(self.revealed), assistant_reply,
                         after_failure=after_failure, has_failing_line=line is not None,
                         vocab=self.script.vocab, tied=tied, got=got,
                         expected=expected_signature(line) if line else None,
                         stated=[d for d in self.script.stated if d not in self.restated] if self.script.restate else ())
        entry = {"turn": len(self.log) + 1, **plan.to_dict(), "verdict": verdict_kind(verdict)}
        if after_failure:
            entry.update(failing_line=line, tied=sorted(tied))
        return plan, entry

    def respond(self, assistant_reply: str, verdict: dict | None) -> Generator[object, object, str]:
        """The next user message. A generator so that an LLM user can yield model calls here."""
        plan, entry = self.plan(assistant_reply, verdict)
        self.plans.append(plan)
        if plan.kind == "item":
            self.revealed.extend(plan.item_ids())
        elif plan.kind == "restate":
            self.restated.append(plan.item_id)
        message = self.express(plan, verdict, assistant_reply)
        self.said.append(message)
        self.log.append(entry)
        return message
        yield  # pragma: no cover - makes this a generator without yielding

    def reaction(self, verdict: dict) -> str:
        """The persona's reaction to this kind of failure, its {error} slot saying what happened.
        A later failure of the session gets a reaction, and a wording of what happened, not used
        before in it where one is left (a second or third failure does not open like the first)."""
        kind = verdict_kind(verdict) or "error"
        slots = failure_slots(verdict)
        key = kind if slots["line"] or kind not in ("assertion", "error") else f"{kind}_no_line"
        if kind == "assertion" and slots["line"].startswith("raise AssertionError(") and slots["message"] != "no message":
            key = "assertion_raise"      # "the check `X` gets a different result" fits no raise line
        reactions = self.script.reactions_for(kind)
        start = _offset(f"{self.script.session_id}/reaction/{kind}", len(reactions))
        options = []   # (reaction template, what-happened template or None, the filled text)
        for template in (reactions[(start + k) % len(reactions)] for k in range(len(reactions))):
            # "{error} tells me ..." needs a noun phrase ("the failing check `...`"), not a clause
            table = self.script.what_happened_subject if slot_role(template) == "subject" else {}
            texts = table.get(key) or table.get(kind) or self.script.what_happened.get(key) or \
                self.script.what_happened.get(kind)
            if not texts:
                options.append((template, None, fill_error(template, failure_summary(verdict))))
                continue
            at = _offset(f"{self.script.session_id}/happened", len(texts))
            for happened in (texts[(at + i) % len(texts)] for i in range(len(texts))):
                options.append((template, happened, fill_error(template, happened.format(**slots))))
        fresh = [o for o in options if all(o[2] not in s for s in self.said)]
        unused = [o for o in fresh if o[0] not in self.used_templates]
        chosen = next((o for o in unused if o[1] not in self.used_templates), None) or next(iter(unused or fresh), None)
        if chosen is None:
            return options[len(self.said) % len(options)][2]
        self.used_templates.extend(t for t in chosen[:2] if t is not None)
        return chosen[2]

    def concession(self, item_ids: Sequence[str], assistant_reply: str) -> str:
        """A reply to the assistant's move before these answers, or "" (never twice a session)."""
        for i in item_ids:
            cues, lines = self.script.concessions.get(i, ((), ()))
            if not lines or not made_move(assistant_reply, cues):
                continue
            if any(line.lower() in s.lower() for s in self.said for line in lines):
                return ""
            text = self._rotate(lines, "concession")
            clar = self.script.clarifications[i]
            return text.lower() if clar[:1].islower() else text
        return ""

    def express(self, plan: Plan, verdict: dict | None, assistant_reply: str = "") -> str:
        """The scripted wording of one plan (also what an LLM user falls back to)."""
        after_failure = verdict is not None and verdict.get("status") != "passed"
        parts = []
        if after_failure:
            parts.append(self.reaction(verdict))
        if plan.kind == "item":   # a question in several parts gets every part it is about answered
            # the item the question is about is answered first, the other parts after it
            ids = plan.item_ids()
            ids = (plan.item_id, *(i for i in ids if i != plan.item_id)) if plan.item_id in ids else ids
            concession = self.concession(ids, assistant_reply) if not parts else ""
            heads, tails = wrap_pieces(self.script.wraps)
            said = " ".join(self.said)
            answers = [strip_wrap(self.script.clarifications[i], heads, tails,
                                  drop_head=k > 0 or bool(parts) or bool(concession), drop_tail=k < len(ids) - 1,
                                  said=said) for k, i in enumerate(ids)]
            parts += [concession, join_answers(answers)]
        elif plan.kind == "failing_check":
            line = failing_line(verdict)
            if not (parts and line in parts[-1]):   # the reaction quoted the line already
                parts.append(self._rotate(self.script.failing_check, "check", line=line))
        elif plan.kind == "restate":
            parts.append(self._rotate(self.script.restate, "restate", text=self.script.stated[plan.item_id]))
        else:
            parts.append(self._rotate(self.script.nothing_left, "nothing"))
        message = " ".join(end_sentence(p) for p in parts if p.strip())
        if message in self.said:  # last resort; keeps the promise never to repeat a message
            message = f"{message} (turn {len(self.said) + 2})"
        return message


def reasoning_shares(records: Iterable[SessionRecord]) -> dict:
    """How the scripted user chose what it said, over the user turns of some session records:
    counts and shares of each basis (question match, failure tie, failing check, priority
    fallback, nothing left), and among the turns that answered a question without a failure,
    the share answered on topic (matched to a hidden item)."""
    from capa_hf.simulator.planner import BASES

    counts = {b: 0 for b in BASES}
    asked = 0
    for rec in records:
        for entry in rec.user_log:
            basis = entry.get("basis")
            if basis in counts:
                counts[basis] += 1
                asked += basis in ("question", "priority") and entry.get("verdict") is None
    turns = sum(counts.values())
    return {"turns": turns, **counts,
            "shares": {b: round(counts[b] / turns, 4) if turns else None for b in BASES},
            "on_topic_share": round(counts["question"] / asked, 4) if asked else None}
