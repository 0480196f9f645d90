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
  curated misreading), or else misapplies a second answered item, gets the user's failure
  reaction, and repairs: a second failed attempt, so history traces get longer;
- in a seeded share of all history sessions (`LONG_TRACE_SHARE`, drawn by `long_traces` among
  those that ask three questions or more), that first repair fails too: it fixes the point the
  user reported and misreads another (the next visible keypoint's misreading, or an answered
  item read the other way, a convention regressed), the user reports that failure as well, and
  the next repair passes: traces of 6-8 assistant turns, as the paper's are;
- every later wrong attempt is one that the variant's tests refuse (its keypoint or dimension
  appears in the variant's failure ties, capa regen-ties), and Stage 3 checks that each one
  failed in the sandbox (stage3_checks.check_attempts);
- the final submission is the variant's clean reference.
Any other engine can play instead (`capa build --assistant SPEC`); sessions it leaves
unresolved are replayed with the reference assistant and flagged as a fallback.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from runners.types import ChatRequest, ChatResult

from capa_hf.defaults import HISTORY_SIZE, LONG_TRACE_SHARE, SECOND_ATTEMPT_SHARE
from capa_hf.generation.stage1_plan import SessionPlan
from capa_hf.generation.stage1_realize import Realization
from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.seeding import pick, rng_for
from capa_hf.simulator.question_match import question_parts
from capa_hf.simulator.reply_lines import answered
from capa_hf.simulator.user_data import ask_fits, variant_ties
from capa_hf.variants.catalog import VariantCatalog
from capa_hf.variants.combos import Variant


@dataclass(frozen=True)
class ReferenceScript:
    asks: tuple[tuple[str, str], ...]    # (the clarification that answers it, the assistant's question)
    code: str                            # the variant's reference
    final_line: str                      # the line before the final code
    guess: str | None = None             # a first attempt that reads one item the wrong way
    guess_line: str = ""
    slips: tuple[str, ...] = ()          # later attempts, once every answer is in, each refused by the tests
    slip_lines: tuple[str, ...] = ()
    questions: tuple[str, ...] = ()      # each ask's bare question (no lead-in), in the order of `asks`
    wraps: tuple[str, ...] = ()          # the persona's clarification wraps (an answer may drop their lead-in)
    answer_line: str = ""                # the line before the final code when it follows an answer, not a
                                         # failure report (a repair line would speak of a failure)

    def wrong_attempts(self) -> int:
        """How many submissions of the trace fail before the final code passes."""
        return (self.guess is not None) + len(self.slips)


def request_key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def code_reply(line: str, code: str) -> str:
    return f"{line}\n\n```python\n{code.rstrip()}\n```"


def plan_keypoints(plan: SessionPlan) -> tuple:
    """The task keypoints a session's plan knows: its items' and its visible ones, each once."""
    kps = [i.keypoint for i in plan.items if i.keypoint is not None] + [k for k, _ in plan.visible]
    return tuple({k.id: k for k in kps}.values())


def _question(item, source: VariantSource | None, dims: Mapping[str, Dimension], seed, sid,
              keypoints: tuple = ()) -> str:
    """The question about one item: a dimension's question, or the keypoint's question or its
    variants-file `asks` line, the latter only where it is about that keypoint (ask_fits: an asks
    line that names another keypoint better would be answered off the point)."""
    if item.kind == "convention":
        nouns = source.nouns if source else None
        q = pick(dims[item.dimension].questions, seed, sid, "question", item.dimension)
        return q.format(result=nouns.result if nouns else "the result", input=nouns.input if nouns else "the input")
    kid = item.keypoint.id
    fits = bool(source) and kid in source.asks and (not keypoints or ask_fits(source.task_id, kid, keypoints))
    options = [item.keypoint.question] + ([source.asks[kid]] if fits else [])
    return pick(options, seed, sid, "question", kid)


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
           dims: Mapping[str, Dimension]) -> str | None:
    """Code that reads the first asked item that can be misread another way (None when nothing
    can be misread)."""
    if variant is None:
        return None
    for item in plan.items:
        if item.apply_unasked:
            continue
        code = _misread(item, variant, source, dims)
        if code is not None:
            return code
    return None


def _asked_misreadings(plan: SessionPlan, variant: Variant, source: VariantSource | None,
                       dims: Mapping[str, Dimension]) -> list[tuple[str, str]]:
    """(ref, code) for each asked item that can be misread, in priority order; the ref is the
    keypoint id or the dimension id, as the failure ties name it."""
    out = []
    for item in plan.items:
        if item.apply_unasked:
            continue
        code = _misread(item, variant, source, dims)
        if code is not None:
            out.append((item.keypoint.id if item.kind == "task" else item.dimension, code))
    return out


def later_attempts(plan: SessionPlan, variant: Variant | None, source: VariantSource | None,
                   dims: Mapping[str, Dimension], refuted: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """(first failing line, code) of each wrong reading the assistant may submit once every
    answer is in, in the order it would: each visible keypoint's curated misreading, then each
    asked item read another way (the guessed one last, and never the guess's own code). With
    `refuted` (ref -> the first line of the variant's tests its other reading fails) only
    readings those tests refuse; without it the line is ""."""
    if variant is None or source is None:
        return []
    guess = _guess(plan, variant, source, dims) if plan.guess_first else None
    visible = [(kp.id, variant.misreading(kp.id)) for kp, _ in plan.visible if kp.id in source.misreadings]
    asked = _asked_misreadings(plan, variant, source, dims)
    out: list[tuple[str, str]] = []
    for ref, code in visible + asked[1:] + asked[:1]:
        if refuted is not None and ref not in refuted:
            continue
        if code not in (c for _, c in out) and code != guess and code.strip() != variant.reference.strip():
            out.append((refuted[ref] if refuted is not None else "", code))
    return out


def _two_apart(later: list[tuple[str, str]]) -> tuple[str, ...]:
    """The first later attempt and the next one that fails at another line (a repair that
    fixes the reported check and breaks a different one), or () when there is none."""
    if not later:
        return ()
    line, first = later[0]
    second = next((c for ln, c in later[1:] if ln != line or not line), None)
    return (first, second) if second is not None else ()


def asked_count(plan: SessionPlan) -> int:
    return sum(1 for i in plan.items if not i.apply_unasked)


def sure_questions(plan: SessionPlan, source: VariantSource | None, dims: Mapping[str, Dimension], seed) -> int:
    """How many of the session's questions the assistant asks at least: one per asked item, less
    one for each further part of a question in several parts (the user may answer them all at once)."""
    return sum(1 - (len(question_parts(_question(i, source, dims, seed, plan.session_id))) - 1)
               for i in plan.items if not i.apply_unasked)


def can_repair_twice(plan: SessionPlan, later: list[tuple[str, str]]) -> bool:
    """A history session whose first repair may fail once more and stay within the turn budget:
    three questions or more (a guess stands for one), and two later attempts that fail at
    different lines of the tests."""
    return plan.position <= HISTORY_SIZE and asked_count(plan) >= 3 and bool(_two_apart(later))


def long_traces(sure: Iterable[str], likely: Iterable[str], n_history: int, seed: int) -> frozenset[str]:
    """The history sessions whose first repair fails once more: LONG_TRACE_SHARE of all
    `n_history` of them, drawn with the build seed, first among the `sure` ones (whose questions
    are asked one by one, so their traces reach 6 turns), then among the `likely` ones (a
    question in several parts may be answered at once, leaving 5); all of them when fewer."""
    rng = rng_for(seed, "second-repair")
    first, then = sorted(set(sure)), sorted(set(likely) - set(sure))
    order = rng.sample(first, len(first)) + rng.sample(then, len(then))
    return frozenset(order[:round(LONG_TRACE_SHARE * n_history)])


def refuted_refs(variant_id: str, test: str) -> dict[str, str]:
    """Ref (keypoint or dimension id) -> the first line of the variant's `test` that its other
    reading fails, for each ref the variant's recorded failure ties name."""
    ties = variant_ties(variant_id)
    out: dict[str, str] = {}
    for line in (ln.strip() for ln in test.splitlines()):
        for ref in ties.get(line, {}):
            out.setdefault(ref, line)
    return out


def mark_second_repairs(plans: dict[str, SessionPlan], catalog: VariantCatalog, sources: Mapping[str, VariantSource],
                        dims: Mapping[str, Dimension], seed: int) -> dict[str, SessionPlan]:
    """The plans, with `second_repair` set on the history sessions `long_traces` draws among
    those whose first repair can fail once more (can_repair_twice), those with three questions
    for sure (sure_questions) first."""
    sure, likely = [], []
    for sid, p in plans.items():
        variant = catalog.variant(p.task_id, dict(p.values)) if p.position <= HISTORY_SIZE else None
        if variant is None:
            continue
        refuted = refuted_refs(variant.id, catalog.problem(p.task_id, dict(p.values)).test)
        source = sources.get(p.task_id)
        if can_repair_twice(p, later_attempts(p, variant, source, dims, refuted)):
            (sure if sure_questions(p, source, dims, seed) >= 3 else likely).append(sid)
    chosen = long_traces(sure, likely, sum(p.position <= HISTORY_SIZE for p in plans.values()), seed)
    return {sid: replace(p, second_repair=True) if sid in chosen else p for sid, p in plans.items()}


def _slips(plan: SessionPlan, variant: Variant | None, source: VariantSource | None,
           dims: Mapping[str, Dimension], seed: int, refuted: Mapping[str, str] | None) -> tuple[str, ...]:
    """The later wrong attempts of a session: two where the plan repairs twice; one in a seeded
    share of the other history sessions; else none."""
    later = later_attempts(plan, variant, source, dims, refuted)
    if plan.second_repair and _two_apart(later):
        return _two_apart(later)
    # a session without a guess slips only after two questions or more: one that reuses known
    # conventions and asks little keeps showing that reuse alone passes
    if not later or plan.position > HISTORY_SIZE or not (plan.guess_first or asked_count(plan) >= 2):
        return ()
    if rng_for(seed, "slip", plan.session_id).random() >= SECOND_ATTEMPT_SHARE:
        return ()
    return (later[0][1],)


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
                     seed: int, refuted: Mapping[str, str] | None = None,
                     keypoints: tuple = (), wraps: tuple = ()) -> ReferenceScript:
    """`refuted` (refuted_refs): the refs (keypoint and dimension ids) the variant's tests tell
    apart, each with the first line its other reading fails; later wrong attempts are drawn
    from these only. `keypoints`: the task's (default: those the plan knows), against which an
    asks line must be about its keypoint to be used."""
    sid = plan.session_id
    by_item = dict(zip((h.id for h in realization.hidden_items), plan.items))
    asks, questions = [], []
    keypoints = keypoints or plan_keypoints(plan)
    for h in realization.hidden_items:
        item = by_item[h.id]
        if item.apply_unasked:
            continue
        q = _question(item, source, dims, seed, sid, keypoints)
        lead = pick((_boundary(item) and lines.get("ask_boundary")) or lines["ask"], seed, sid, "ask", h.id)
        asks.append((h.clarification, lead.format(question=q)))
        questions.append(q)
    applied = [pick(dims[i.dimension].value(i.value).applied or dims[i.dimension].value(i.value).state,
                    seed, sid, "recap", i.dimension).format(result="it", input="the input")
               for i in plan.items if i.apply_unasked]
    guess = _guess(plan, variant, source, dims) if plan.guess_first else None
    slips = _slips(plan, variant, source, dims, seed, refuted)
    if len(slips) > 1:       # a repair that failed once more: the last one says so
        final = pick(lines["repair_again"], seed, sid, "repair")
    elif guess is not None or slips:
        final = pick(lines["repair"], seed, sid, "repair")
    elif applied:
        final = pick(lines["applied"], seed, sid, "applied").format(recap=" and ".join(applied))
    else:
        final = pick(lines["submit"], seed, sid, "submit")
    # the first later attempt follows the answers; each one after it is a repair of the one before
    slip_lines = [pick(lines["submit"], seed, sid, "slip")] if slips else []
    repairs = [line for line in lines["repair"] if line != final]
    for n in range(1, len(slips)):
        slip_lines.append(pick([r for r in repairs if r not in slip_lines], seed, sid, "slip", n))
    answer_line = pick(lines["submit"], seed, sid, "submit") if guess is not None or slips else ""
    return ReferenceScript(asks=tuple(asks), code=reference, final_line=final, guess=guess, answer_line=answer_line,
                           wraps=tuple(wraps),
                           guess_line=pick(_guess_lines(plan, lines), seed, sid, "guess") if guess else "",
                           slips=slips, slip_lines=tuple(slip_lines), questions=tuple(questions))


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
            if not answered(answer, later, script.wraps):
                return question
        sent = [m["content"] for m in messages if m["role"] == "assistant"]
        for code, line in zip(script.slips, script.slip_lines):
            if not any(code.rstrip() in m for m in sent):
                return code_reply(line, code)
        after_answer = bool(sent) and "```" not in sent[-1] and script.answer_line
        return code_reply(script.answer_line if after_answer else script.final_line, script.code)

    def generate(self, requests: list[ChatRequest]) -> list[ChatResult]:
        out = []
        for req in requests:
            text = self.reply(req.message_dicts())
            out.append(ChatResult(text=text, finish_reason="stop", prompt_tokens=0,
                                  completion_tokens=len(text.split())))
        return out

