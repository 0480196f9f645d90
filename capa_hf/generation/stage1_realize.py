"""Stage 1, part two: write the ambiguous request and each hidden item's clarification.

A realizer turns a `SessionPlan` into surface text. `TemplateRealizer` is the offline default:
it assembles curated fragments (keypoint lines, convention phrasings, persona voice kits,
discipline lexicons) with seeded choices:
- a persona's openers and closers are dealt without replacement over its sessions (`voice_slot`),
  so the same greeting does not open request after request;
- a hidden convention is obscured by its mechanism's phrasing of the dimension; each mechanism
  keeps a small cell-specific set of phrasings per dimension (the user's recognizable way of
  saying it) and picks among them per session. A hidden task keypoint says its own vague line;
- a request keeps at most `MAX_APPEALS` stand-ins that appeal to a habit, a setup or an earlier
  session (`silenced`);
- the body's layout varies (prose or a short list), always with the goal before the details it
  sums up, and no sentence repeats;
- articles agree with the noun that follows, also after a lexicon swap.
An LLM realizer (`capa build --realizer llm:SPEC`) implements the same `realize` and passes the
same Stage 3 checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from capa_hf.generation.empty_results import neutral_state_forms
from capa_hf.generation.persona_voice import persona_voice
from capa_hf.generation.stage1_lexicon import MAX_SWAPS, Mapping, fix_articles, mapping_for, math_kept, wants_an
from capa_hf.generation.stage1_plan import PlannedItem, SessionPlan
from capa_hf.schema import Cell, HiddenItem, Lexicon, Persona, TaskContent
from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.seeding import pick, pick_index, rng_for

STYLE_SUBSET = 3          # phrasings a user keeps per (mechanism, category or dimension)
MAX_APPEALS = 2           # stand-ins per request that appeal to a habit, a setup or an earlier session
LIST_LAYOUT = 0.25
GIST_FRAMES = ("{Gist}", "I need a function to {gist}", "Could you write something to {gist}?",
               "The job: {gist}", "What I'm after is a function to {gist}", "The task, in short: {gist}")


@dataclass(frozen=True)
class RequestContext:
    cell: Cell
    persona: Persona
    lexicon: Lexicon
    content: TaskContent
    source: VariantSource | None
    dimensions: dict[str, Dimension]
    plan: SessionPlan
    phrases: dict             # Stage 1 phrases (capa_hf/data/stage1_phrases.yaml: the lexicon glosses)
    seed: int
    attempt: int = 0
    voice_slot: int = 0       # this session's index among the persona's sessions

    @property
    def session_id(self) -> str:
        return self.plan.session_id


@dataclass(frozen=True)
class Realization:
    initial_request: str
    hidden_items: tuple[HiddenItem, ...]
    opener: str
    closer: str
    visible: tuple[str, ...] = ()      # what the request states plainly (gist, keypoint lines, conventions)


class Realizer(Protocol):
    name: str

    def realize(self, ctx: RequestContext) -> Realization: ...


def sentence(text: str) -> str:
    text = " ".join(text.split())
    if text and text[-1] not in ".!?)`:":
        text += "."
    return text


def first_upper(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


# quoted literals (a quote not inside a word, so "can't ... that's" is no quotation), code,
# Python constants, acronyms and camelCase names keep their case
_KEEP_CASE = re.compile(r"((?<![A-Za-z])'[^'\n]*'(?![A-Za-z])|\"[^\"\n]*\"|`[^`\n]*`|\b(?:True|False|None)\b"
                        r"|\b[A-Z]{2,}\w*\b|\b\w*[a-z][A-Z]\w*\b)")


def casual_case(text: str) -> str:
    """Lower-case a message the way a hurried typist would, but never inside quotes or code
    literals, so that values such as 'Yes', True or ValueError keep their meaning."""
    parts = _KEEP_CASE.split(text)
    return "".join(p if i % 2 else p.lower() for i, p in enumerate(parts))


def cell_mapping(ctx: RequestContext) -> Mapping:
    """The user's fixed noun choices: the same in all ten sessions of a cell."""
    return mapping_for(ctx.lexicon, lambda entity, n: pick_index(n, ctx.seed, ctx.cell.cell_id, "noun", entity))


def is_plural(noun_phrase: str) -> bool:
    """Whether a task noun ("the two lists", "the list of numbers") takes a plural verb: by its
    head word, the last one before any "of"."""
    head = noun_phrase.split(" of ")[0].split()
    return bool(head) and head[-1].endswith("s") and not head[-1].endswith(("ss", "is", "us"))


_AGREE = {"is": "are", "has": "have", "hits": "hit", "was": "were", "comes": "come", "turns": "turn",
          "looks": "look"}


def fill(template: str, ctx: RequestContext, practice: str | None = None) -> str:
    """Fill a phrasing's slots; a verb right after a plural {input} agrees with it, and "sort the
    sorted words" loses its echo."""
    nouns = ctx.source.nouns if ctx.source else None
    result = nouns.result if nouns else "the result"
    noun_in = nouns.input if nouns else "the input"
    if re.search(r"\b(?:largest|smallest)\b", result) and re.search(
            r"\b(?:largest|smallest) to (?:largest|smallest)\b|ascending|descending", template):
        result = "them"     # not "order the largest numbers from largest to smallest"
    if is_plural(noun_in):
        template = re.sub(r"\{input\}( on my side| on my machine)? (is|has|hits|was|comes|turns|looks)\b",
                          lambda m: "{input}" + (m.group(1) or "") + " " + _AGREE[m.group(2)], template)
        template = re.sub(r"(\{input\}[^.;]*?\bnothing in )it\b", r"\1them", template)
    field = (persona_voice().fields or {}).get(ctx.persona.id, ctx.lexicon.name)
    text = template.format(result=result, input=noun_in, discipline=field, practice=practice or field)
    return re.sub(r"\b(Sort|Order|Rank|sort|order|rank) the sorted\b", r"\1 the", text)


def state_forms(ctx: RequestContext, dimension: str, value: str) -> tuple[str, ...]:
    """How a request states a convention value plainly: the dimension's `state` lines, except that
    the neutral empty-input value of a task whose empty result is a bool, a number or a string
    names that result ("return False"): "the empty result" of a True/False check is no answer."""
    if dimension == "empty_input" and value == "neutral":
        forms = neutral_state_forms(ctx.plan.task_id)
        if forms:
            return forms
    return ctx.dimensions[dimension].value(value).state


def user_phrasing(options, ctx: RequestContext, *key) -> str:
    """One of a small cell-specific subset of `options`, picked per session."""
    options = list(options)
    rng = rng_for(ctx.seed, ctx.cell.cell_id, "style", *key)
    subset = rng.sample(options, min(STYLE_SUBSET, len(options)))
    return pick(subset, ctx.seed, ctx.session_id, ctx.attempt, "style", *key)


def dealt(options, ctx: RequestContext, what: str) -> str:
    """Deal `options` without replacement over the persona's sessions (seeded order)."""
    options = list(options)
    order = list(range(len(options)))
    rng_for(ctx.seed, ctx.persona.id, what, "deal").shuffle(order)
    return options[order[(ctx.voice_slot + 7 * ctx.attempt) % len(options)]]


def points_back_ok(ctx: RequestContext, item: PlannedItem) -> bool:
    """A deixis form ("same as the other one", "like before") points at an earlier session where
    that point came up: for a convention, one of the cell's history sessions where the user stated
    it (`revealed_in`). A task keypoint belongs to its task, which no earlier session of the cell
    had, so "same idea as the function above" would point at nothing: it gets another kind."""
    return item.kind == "convention" and bool(item.revealed_in)


def in_voice(options, persona, op: str, key: str) -> list[str]:
    """The phrasings a persona can say: a solo persona (a student) does not speak for a team
    when it appeals to habits (capa_hf/data/persona_voice.yaml); where every phrasing does, the
    solo ones stand in."""
    voice = persona_voice()
    options = list(options)
    own = [o for o in options if not voice.foreign_words(o, persona.id)]   # no other persona's words
    options = own or options
    if persona.id not in voice.solo or op != "habitual":
        return options
    kept = [o for o in options if not voice.speaks_for_group(o)]
    return kept + list(voice.solo_habitual.get(key, ())) or options


def own_words(wraps) -> list[str]:
    """The clarification wraps that do not put the text in someone else's mouth."""
    voice = persona_voice()
    kept = [w for w in wraps if not voice.reports_speech(w)]
    return kept or ["{text}"]


def is_appeal(item: PlannedItem) -> bool:
    """Whether an item's stand-in appeals to something the assistant has to know (the user's habit,
    their setup, an earlier session) rather than saying the point in the task's own vague words:
    three of those in one request read as a form letter ("Treat the corner cases the way the team
    always does. Nothing-to-work-with cases go by the house rule."), so a request keeps few of
    them (`silenced`)."""
    return item.kind == "convention" and item.mechanism.operation in ("habitual", "operator", "deixis", "vague")


def gloss_owners(items, obscured: dict[int, str], glosses: list) -> dict:
    """Which lexicon item's clarification explains each field noun: the first whose stand-in uses
    the noun, else the first lexicon item, so "by 'quantity' I mean a number" follows an answer about
    the sentence that said "quantity" rather than one about something else."""
    dcp = [i for i, item in enumerate(items) if item.mechanism.operation == "lexicon"]
    return {g: next((i for i in dcp if re.search(rf"\b{re.escape(g[0].rstrip('y'))}", obscured[i], re.IGNORECASE)),
                    dcp[0] if dcp else -1) for g in glosses}


def silenced(items, texts: list[str]) -> set[int]:
    """The appeal stand-ins a request leaves out (by index): every mechanism keeps its first, so
    each acts in the text; the others fill up to `MAX_APPEALS` in priority order, and none opens
    like one already kept."""
    appeal = [i for i, item in enumerate(items) if texts[i] and is_appeal(item)]
    kept: list[int] = []
    for i in appeal:
        if not any(items[j].mechanism.id == items[i].mechanism.id for j in kept):
            kept.append(i)
    for i in appeal:
        if i not in kept and len(kept) < MAX_APPEALS and opening(texts[i]) not in {opening(texts[j]) for j in kept}:
            kept.append(i)
    return set(appeal) - set(kept)


def opening(text: str) -> tuple[str, ...]:
    """A sentence's first two words, lower-cased: two stand-ins that open alike read as a template."""
    return tuple(re.sub(r"[^a-z' ]+", " ", text.lower()).split()[:2])


class TemplateRealizer:
    name = "template"

    # -- what the request says in place of a hidden item ------------------------------------
    def obscure(self, ctx: RequestContext, item: PlannedItem, mapping: Mapping) -> tuple[str, list]:
        op = item.mechanism.operation
        if op == "remove":
            return "", []
        if op == "deixis" and not points_back_ok(ctx, item):
            op = "vague"      # "same as the other one" needs an other one where the point came up
        if item.kind == "convention":
            dim = ctx.dimensions[item.dimension]
            practice = persona_voice().practice(ctx.persona.id, dim.id) if op == "lexicon" else None
            # a field's records settle only some dimensions; for the rest a habit stands in
            family = "habitual" if op == "lexicon" and practice is None else op
            text = fill(user_phrasing(in_voice(dim.vague[family], ctx.persona, family, dim.id), ctx, item.mechanism.id,
                                      dim.id), ctx, practice)
            return (mapping.swap(text) if op == "lexicon" else (text, []))
        # a task item's point belongs to this task alone, so an appeal to the user's habits or to an
        # earlier session ("define the root the way our team always has") points at nothing the
        # assistant could know and reads as a form letter (0.3.1 review): it says the keypoint's own
        # vague line, written for it, in the user's field nouns when the mechanism swaps nouns
        kp = item.keypoint
        return mapping.swap(kp.vague) if op == "lexicon" else (kp.vague, [])

    def clarify(self, ctx: RequestContext, item: PlannedItem, glosses: list) -> str:
        if item.kind == "convention":
            value = ctx.dimensions[item.dimension].value(item.value)
            habit = pick(value.habit, ctx.seed, ctx.session_id, ctx.attempt, "habit", item.dimension)
            state = fill(pick(state_forms(ctx, item.dimension, item.value), ctx.seed, ctx.session_id, "state",
                              item.dimension), ctx)
            text = f"{sentence(habit)} {sentence(first_upper(state))}"
        else:   # the dimension-neutral line when there is one: the variant may differ from HumanEval
            neutral = ctx.source.neutral_plain if ctx.source else {}
            text = sentence(neutral.get(item.keypoint.id, item.keypoint.plain))
        op = item.mechanism.operation
        if op == "lexicon" and glosses:
            # one way of explaining per noun, fixed for the user, so six nouns do not read six times alike
            forms = in_voice(ctx.phrases["lexicon_gloss"], ctx.persona, op, "gloss")
            text += " " + " ".join(
                forms[pick_index(len(forms), ctx.seed, ctx.cell.cell_id, "gloss", d)].format(
                    domain=d, cs=c, a_cs=("an " if wants_an(c) else "a ") + c) for d, c in glosses)
        # no concession ("right, you can't see my machine") here: the simulated user says one only
        # when the assistant has said so (user_lines.yaml: concessions)
        # a first-person habit ("I always want tuples") is the user's own words, never someone else's;
        # nor is a task fact: a reply may carry both, and "my friend said: ..." then takes in the habit
        wraps = own_words(ctx.persona.voice.clarification_wraps)
        wrap = pick(wraps, ctx.seed, ctx.session_id, ctx.attempt, "wrap", item.dimension or item.keypoint.id)
        text = fix_articles(wrap.format(text=text))
        return casual_case(text) if any(m.kind == "lowercase" for m in ctx.persona.voice.style_moves) else text

    # -- the request ------------------------------------------------------------------------
    def swapped_entities(self, ctx: RequestContext, mapping: Mapping) -> list[str]:
        """The few entities this request names by field nouns, at most MAX_SWAPS: first those the
        lexicon items' own lines use, so a swap lands where the hidden point is, then those of the
        gist (the task as the user thinks of it), in order."""
        bare = mapping.only(())
        texts = [self.obscure(ctx, item, bare)[0] for item in ctx.plan.items if item.mechanism.operation == "lexicon"]
        texts.append(ctx.content.gist)
        found: list[str] = []
        for text in texts:
            found += [e for e in mapping.entities_in(text) if e not in found]
        task_text = " ".join([ctx.content.gist, *(k.description for k in ctx.content.keypoints)])
        return math_kept(found, task_text)[:MAX_SWAPS]

    def realize(self, ctx: RequestContext) -> Realization:
        mapping = cell_mapping(ctx)
        plan = ctx.plan
        dcp = any(i.mechanism.operation == "lexicon" for i in plan.items)
        if dcp:
            mapping = mapping.only(self.swapped_entities(ctx, mapping))

        def speak(text: str) -> tuple[str, list]:
            # a domain-cognitive user names things by their field's nouns throughout the request
            return mapping.swap(text) if dcp else (text, [])

        gist, glosses = speak(ctx.content.gist)
        slots: list[tuple[int, str]] = []          # (order, sentence) of the body
        plain: list[str] = [gist]                  # the sentences that state things plainly
        visible = {k.id: line for k, line in plan.visible}
        obscured: dict[int, str] = {}
        for k in ctx.content.keypoints:
            if k.id in visible:
                text, used = speak(visible[k.id])
                slots.append((int(k.id[3:]), sentence(first_upper(text))))
                plain.append(text)
                glosses += [g for g in used if g not in glosses]
        conv_kp = {d: kp for kp, d in (ctx.source.convention_keypoints.items() if ctx.source else ())}
        said = [self.obscure(ctx, item, mapping) for item in plan.items]
        for i in silenced(plan.items, [t for t, _ in said]):
            said[i] = ("", [])          # a third "the way we always do", or a second built alike
        for i, item in enumerate(plan.items):
            text, used = said[i]
            glosses += [g for g in used if g not in glosses]
            obscured[i] = text
            if text:
                slots.append((item.order, sentence(first_upper(text))))
        for d, value in plan.stated:
            state = fill(pick(state_forms(ctx, d, value), ctx.seed, ctx.session_id, "state", d), ctx)
            order = int(conv_kp[d][3:]) if d in conv_kp else 100
            slots.append((order, sentence(first_upper(state))))
            plain.append(state)
        slots.sort(key=lambda s: s[0])
        hidden = []
        owner = gloss_owners(plan.items, obscured, glosses)
        for i, item in enumerate(plan.items):
            hidden.append(HiddenItem(
                id=f"h{len(hidden) + 1}", kind=item.kind,
                keypoint_id=item.keypoint.id if item.keypoint else None, dimension=item.dimension,
                mechanism=item.mechanism.id, obscured_as=obscured[i],
                clarification=self.clarify(ctx, item, [g for g in glosses if owner[g] == i]),
                resolvable_from_history=bool(item.revealed_in), revealed_in=item.revealed_in))
        out = self.frame(ctx, gist, [s for _, s in slots], tuple(hidden))
        return Realization(out.initial_request, out.hidden_items, out.opener, out.closer, tuple(plain))

    def frame(self, ctx: RequestContext, gist: str, details: list[str], hidden: tuple[HiddenItem, ...]
              ) -> Realization:
        voice = ctx.persona.voice
        key = (ctx.seed, ctx.session_id, ctx.attempt)
        rng = rng_for(*key, "layout")
        opener, closer = dealt(voice.openers, ctx, "opener"), dealt(voice.closers, ctx, "closer")
        # an opener that already asks for a function is not followed by "I need a function to ..."
        # ... and one that names the task is not followed by "The task, in short: ..."
        # ... nor one that opens like the opener ("I need a small unit ... I need a function to ...")
        frames = [f for f in GIST_FRAMES if not any(w in f.lower() and re.search(rf"\b{w}\b", opener, re.I)
                                                    for w in ("function", "task"))
                  and not (f.startswith("I need") and re.search(r"\bI need\b", opener))]
        frame = pick(frames, *key, "gist-frame")
        g = gist.strip().rstrip(".")
        goal = sentence(frame.format(Gist=first_upper(g) + ".", gist=g[:1].lower() + g[1:]))
        details = _unique(details)
        tail: list[str] = []
        pasted = None
        markdown_header = None
        lowercase = False
        for move in voice.style_moves:
            if move.kind == "lowercase":
                lowercase = True
            elif move.kind == "filler" and details:
                i = pick_index(len(details), *key, "filler-at")
                details[i] = f"{pick(move.variants, *key, 'filler')} {details[i][:1].lower()}{details[i][1:]}"
            elif move.kind == "aside":
                tail.append(sentence(pick(move.variants, *key, "aside")))
            elif move.kind == "pasted_comment":
                pasted = pick(move.variants, *key, "comment")
            elif move.kind == "rules_markdown":
                markdown_header = pick(move.variants, *key, "rules")
        if markdown_header:
            rules = "\n".join(f"{i}. {s}" for i, s in enumerate(details, 1))
            text = f"{sentence(opener)} {goal}\n\n{markdown_header}\n{rules}\n\n" + " ".join(tail)
            text += f"\n{sentence(closer)}"
        elif details and rng.random() < LIST_LAYOUT:
            bullets = "\n".join(f"- {s}" for s in details)
            text = f"{sentence(opener)} {goal}\n{bullets}\n" + " ".join([*tail, sentence(closer)])
        else:
            text = " ".join([sentence(opener), goal, *details, *tail, sentence(closer)])
        if pasted:
            text += "\n" + pasted
        text = "\n".join(line.rstrip() for line in text.splitlines()).strip()
        text = fix_articles(text)
        if lowercase:
            text = casual_case(text)
        return Realization(initial_request=text, hidden_items=hidden, opener=opener, closer=closer)


def _unique(sentences: list[str]) -> list[str]:
    seen, out = set(), []
    for s in sentences:
        key = " ".join(re.sub(r"[^a-z0-9 ]+", " ", s.lower()).split())
        if key and key not in seen:
            seen.add(key)
            out.append(s)
    return out
