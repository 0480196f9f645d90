"""Stage 2: play each session through the shared simulator to a resolved trace.

The default assistant is `ReferenceAssistant`, a real runners engine that only ever sees the
conversation. Per session it follows a script written from the Stage 1 plan:
- conventions the user showed in earlier sessions of the cell and the plan marks as applied
  are used without asking (a recap line names them), so history itself shows reuse;
- every other hidden item is asked about, one question per turn, in varied wording (the
  keypoint's question or its second phrasing, the dimension's questions; varied lead-ins); a
  question about an item hidden by asking for work on the user's machine first says that the
  assistant cannot reach it (ask_boundary), and so does a first attempt in such a session;
- an answer counts as given when the user's message holds the clarification, or its body
  without a lead-in the user dropped when answering several parts at once (reply_lines.answered);
- in a seeded share of history sessions it first submits a plausible misreading (a curated one
  for a task item, another value's reference for a convention), gets the user's failure
  reaction, and repairs;
- in a seeded share of history sessions (`SECOND_ATTEMPT_SHARE`) that guessed first or asked two
  questions or more, once every question
  is answered, it submits code that misreads a point the request stated plainly (that keypoint's
  curated misreading, which every variant's tests refuse), or else misapplies a second answered
  item, gets the user's failure reaction, and repairs: a second failed attempt, so history
  traces get longer, toward the paper's 6-8 turns;
- the final submission is the variant's clean reference.
Any other engine can play instead (`capa build --assistant SPEC`); sessions it leaves
unresolved are replayed with the reference assistant and flagged as a fallback.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Mapping

from runners.types import ChatRequest, ChatResult

from capa_hf.defaults import HISTORY_SIZE, SECOND_ATTEMPT_SHARE
from capa_hf.generation.stage1_plan import SessionPlan
from capa_hf.generation.stage1_realize import Realization
from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.seeding import pick, rng_for
from capa_hf.simulator.reply_lines import answered
from capa_hf.variants.combos import Variant


@dataclass(frozen=True)
class ReferenceScript:
    asks: tuple[tuple[str, str], ...]    # (the clarification that answers it, the assistant's question)
    code: str                            # the variant's reference
    final_line: str                      # the line before the final code
    guess: str | None = None             # a first attempt that reads one item the wrong way
    guess_line: str = ""
    slip: str | None = None              # a later attempt that misreads a stated point
    slip_line: str = ""


def request_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def code_reply(line: str, code: str) -> str:
    return f"{line}\n\n```python\n{code.rstrip()}\n```"


def _question(item, source: VariantSource | None, dims: Mapping[str, Dimension], seed, sid) -> str:
    if item.kind == "convention":
        nouns = source.nouns if source else None
        q = pick(dims[item.dimension].questions, seed, sid, "question", item.dimension)
        return q.format(result=nouns.result if nouns else "the result", input=nouns.input if nouns else "the input")
    options = [item.keypoint.question] + ([source.asks[item.keypoint.id]] if source and
                                           item.keypoint.id in source.asks else [])
    return pick(options, seed, sid, "question", item.keypoint.id)


def _misread(item, variant: Variant, source: VariantSource | None, dims: Mapping[str, Dimension]) -> str | None:
    """Code that reads one hidden item the wrong way (None when it cannot be misread)."""
    if item.kind == "task" and source and item.keypoint.id in source.misreadings:
        return variant.misreading(item.keypoint.id)
    if item.kind == "convention":
        he = source.dimensions[item.dimension]
        other = he if he != item.value else next(v for v in dims[item.dimension].value_ids() if v != item.value)
        return variant.with_value(item.dimension, other).reference
    return None


def _guess(plan: SessionPlan, variant: Variant | None, source: VariantSource | None,
           dims: Mapping[str, Dimension], skip: int = 0) -> str | None:
    """Code that reads an asked item another way: the first one that can be misread, or with
    `skip` the next after that (None when nothing can be misread)."""
    if variant is None:
        return None
    for item in plan.items:
        if item.apply_unasked:
            continue
        code = _misread(item, variant, source, dims)
        if code is not None:
            if not skip:
                return code
            skip -= 1
    return None


def _slip(plan: SessionPlan, variant: Variant | None, source: VariantSource | None,
          dims: Mapping[str, Dimension], seed: int) -> str | None:
    """In a seeded share of history sessions: code that misreads a visible keypoint,
    or else a second asked item after its answer came in (None when nothing is left to misread)."""
    asked = sum(1 for i in plan.items if not i.apply_unasked)
    # a session without a guess slips only after two questions or more: one that reuses known
    # conventions and asks little keeps showing that reuse alone passes
    if variant is None or source is None or plan.position > HISTORY_SIZE or not (plan.guess_first or asked >= 2):
        return None
    if rng_for(seed, "slip", plan.session_id).random() >= SECOND_ATTEMPT_SHARE:
        return None
    for kp, _ in plan.visible:
        if kp.id in source.misreadings:
            return variant.misreading(kp.id)
    return _guess(plan, variant, source, dims, skip=1)


def _boundary(item) -> bool:
    """An item hidden by asking for work on the user's own machine or data."""
    return item.mechanism.operation == "operator"


def _guess_lines(plan: SessionPlan, lines: Mapping) -> list[str]:
    """Before a first attempt: where the request asked for work on the user's machine, a line
    saying the assistant cannot reach it (so the user's concession replies to something said)."""
    boundary = any(_boundary(i) for i in plan.items if not i.apply_unasked)
    return lines.get("guess_boundary") if boundary and lines.get("guess_boundary") else lines["guess"]


def reference_script(plan: SessionPlan, realization: Realization, variant: Variant | None, reference: str,
                     source: VariantSource | None, dims: Mapping[str, Dimension], lines: Mapping,
                     seed: int) -> ReferenceScript:
    sid = plan.session_id
    by_item = dict(zip((h.id for h in realization.hidden_items), plan.items))
    asks = []
    for h in realization.hidden_items:
        item = by_item[h.id]
        if item.apply_unasked:
            continue
        q = _question(item, source, dims, seed, sid)
        lead = pick((_boundary(item) and lines.get("ask_boundary")) or lines["ask"], seed, sid, "ask", h.id)
        asks.append((h.clarification, lead.format(question=q)))
    applied = [pick(dims[i.dimension].value(i.value).applied or dims[i.dimension].value(i.value).state,
                    seed, sid, "recap", i.dimension).format(result="it", input="the input")
               for i in plan.items if i.apply_unasked]
    guess = _guess(plan, variant, source, dims) if plan.guess_first else None
    slip = _slip(plan, variant, source, dims, seed)
    if guess is not None or slip is not None:
        final = pick(lines["repair"], seed, sid, "repair")
    elif applied:
        final = pick(lines["applied"], seed, sid, "applied").format(recap=" and ".join(applied))
    else:
        final = pick(lines["submit"], seed, sid, "submit")
    return ReferenceScript(asks=tuple(asks), code=reference, final_line=final, guess=guess,
                           guess_line=pick(_guess_lines(plan, lines), seed, sid, "guess") if guess else "", slip=slip,
                           slip_line=pick(lines["submit"], seed, sid, "slip") if slip else "")


class ReferenceAssistant:
    """Plays its script: a guess first (if scripted), then each unanswered question, then the code."""

    name = "reference"
    model = "reference-v2"

    def __init__(self) -> None:
        self.scripts: dict[str, ReferenceScript] = {}

    def add(self, initial_request: str, script: ReferenceScript) -> None:
        self.scripts[request_key(initial_request)] = script

    def describe(self) -> dict:
        return {"engine": self.name, "model": self.model}

    def cache_identity(self) -> dict:
        return {}

    def reply(self, messages: list[dict]) -> str:
        users = [m["content"] for m in messages if m["role"] == "user"]
        script = self.scripts.get(request_key(users[0])) if users else None
        if script is None:
            raise KeyError("the reference assistant has no script for this request")
        n_assistant = sum(1 for m in messages if m["role"] == "assistant")
        if script.guess is not None and n_assistant == 0:
            return code_reply(script.guess_line, script.guess)
        later = " ".join(users[1:])
        for answer, question in script.asks:
            if not answered(answer, later):
                return question
        if script.slip is not None and not any(script.slip.rstrip() in m["content"] for m in messages
                                               if m["role"] == "assistant"):
            return code_reply(script.slip_line, script.slip)
        return code_reply(script.final_line, script.code)

    def generate(self, requests: list[ChatRequest]) -> list[ChatResult]:
        out = []
        for req in requests:
            text = self.reply(req.message_dicts())
            out.append(ChatResult(text=text, finish_reason="stop", prompt_tokens=0,
                                  completion_tokens=len(text.split())))
        return out

