"""Stage 1, part two: write the ambiguous request and the hidden items' clarifications.

A realizer turns a `ControlPlan` into surface text. `TemplateRealizer` is the offline default:
it assembles curated fragments (keypoint phrasings, persona voice kits, discipline lexicons,
phrase families) with seeded choices. An LLM realizer would implement the same `realize`
signature and be checked by the same Stage 3 rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from capa_hf.generation.controls import ControlPlan
from capa_hf.generation.lexicon_swap import Mapping, mapping_for
from capa_hf.generation.seeding import pick, pick_index
from capa_hf.schema import Cell, HiddenItem, Keypoint, Lexicon, Persona, TaskContent


@dataclass(frozen=True)
class RequestContext:
    session_id: str
    cell: Cell
    persona: Persona
    lexicon: Lexicon
    content: TaskContent
    plan: ControlPlan
    controls: dict
    seed: int
    attempt: int = 0


@dataclass(frozen=True)
class Realization:
    initial_request: str
    hidden_items: tuple[HiddenItem, ...]
    opener: str
    closer: str


class Realizer(Protocol):
    name: str

    def realize(self, ctx: RequestContext) -> Realization: ...


def cell_mapping(ctx: RequestContext) -> Mapping:
    """The user's fixed noun choices: the same in all ten sessions of a cell."""
    return mapping_for(ctx.lexicon, lambda entity, n: pick_index(n, ctx.seed, ctx.cell.cell_id, "noun", entity))


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    if text and text[-1] not in ".!?)`":
        text += "."
    return text


def _first_upper(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


_KEEP_CASE = re.compile(r"('[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|\b(?:True|False|None)\b|\b[A-Z]{2,}\b|\b\w*[a-z][A-Z]\w*\b)")


def casual_case(text: str) -> str:
    """Lower-case a message the way a hurried typist would, but never inside quotes or code
    literals, so that values such as 'Yes' or True keep their meaning."""
    parts = _KEEP_CASE.split(text)
    return "".join(p if i % 2 else p.lower() for i, p in enumerate(parts))


class TemplateRealizer:
    name = "template"

    def _family(self, ctx: RequestContext, op: str, kp: Keypoint) -> str:
        variants = ctx.controls[op][kp.category]
        # the cell keeps one variant per mechanism, so its phrase recurs across sessions
        return variants[pick_index(len(variants), ctx.seed, ctx.cell.cell_id, op)]

    def _obscure(self, ctx: RequestContext, kp: Keypoint, op: str, mapping: Mapping) -> tuple[str, list]:
        if op == "vague":
            return kp.vague, []
        if op == "lexicon":
            return mapping.swap(kp.vague)
        if op == "remove":
            return "", []
        return self._family(ctx, op, kp), []

    def _clarification(self, ctx: RequestContext, kp: Keypoint, op: str, glosses: list) -> str:
        text = _sentence(kp.plain)
        if op == "lexicon" and glosses:
            gloss_t = ctx.controls["lexicon_gloss"][pick_index(len(ctx.controls["lexicon_gloss"]),
                                                               ctx.seed, ctx.cell.cell_id, "gloss")]
            text += " " + " ".join(gloss_t.format(domain=d, cs=c, a_cs=("an " if c[0] in "aeiou" else "a ") + c)
                                   for d, c in glosses)
        if op == "operator":
            conc = ctx.controls["operator_concession"]
            text = conc[pick_index(len(conc), ctx.seed, ctx.cell.cell_id, "concession")].format(text=text)
        wraps = ctx.persona.voice.clarification_wraps
        wrap = pick(wraps, ctx.seed, ctx.session_id, ctx.attempt, "wrap", kp.id)
        return wrap.format(text=text)

    def realize(self, ctx: RequestContext) -> Realization:
        mapping = cell_mapping(ctx)
        dcp_active = any(a.mechanism.operation == "lexicon" for a in ctx.plan.actions)

        def speak(text: str) -> tuple[str, list]:
            # a domain-cognitive user names things by their field's nouns throughout the request
            return mapping.swap(text) if dcp_active else (text, [])

        gist, glosses = speak(ctx.content.gist)
        body = [_sentence(_first_upper(gist))]
        acted = []
        for kp in ctx.content.keypoints:
            mech = ctx.plan.mechanism_of(kp.id)
            if mech is None:
                text, used = speak(kp.plain)
                body.append(_sentence(text))
            else:
                text, used = self._obscure(ctx, kp, mech.operation, mapping)
                if text:
                    body.append(_sentence(_first_upper(text)))
                acted.append((kp, mech, text))
            glosses += [g for g in used if g not in glosses]
        hidden = []
        for kp, mech, obscured in acted:
            # the first domain-cognitive item explains every field noun the request used
            first_dcp = mech.operation == "lexicon" and not any(h.mechanism == mech.id for h in hidden)
            hidden.append(HiddenItem(
                id=f"h{len(hidden) + 1}", keypoint_id=kp.id, mechanism=mech.id, obscured_as=obscured,
                clarification=self._clarification(ctx, kp, mech.operation, glosses if first_dcp else [])))
        return self._frame(ctx, body, tuple(hidden))

    def _frame(self, ctx: RequestContext, body: list[str], hidden: tuple[HiddenItem, ...]) -> Realization:
        voice = ctx.persona.voice
        key = (ctx.seed, ctx.session_id, ctx.attempt)
        opener = pick(voice.openers, *key, "opener")
        closer = pick(voice.closers, *key, "closer")
        tail: list[str] = []
        markdown_header = None
        lowercase = False
        for move in voice.style_moves:
            if move.kind == "lowercase":
                lowercase = True
            elif move.kind == "filler":
                i = pick_index(len(body), *key, "filler-at")
                body[i] = f"{pick(move.variants, *key, 'filler')} {body[i][:1].lower()}{body[i][1:]}"
            elif move.kind == "aside":
                tail.append(_sentence(pick(move.variants, *key, "aside")))
            elif move.kind == "pasted_comment":
                tail.append("\n" + pick(move.variants, *key, "comment"))
            elif move.kind == "rules_markdown":
                markdown_header = pick(move.variants, *key, "rules")
        if markdown_header:
            rules = "\n".join(f"{i}. {s}" for i, s in enumerate(body, 1))
            text = f"{_sentence(opener)}\n\n{markdown_header}\n{rules}\n\n" + " ".join(tail) + f"\n{_sentence(closer)}"
        else:
            text = " ".join([_sentence(opener), *body, *[t for t in tail if not t.startswith("\n")],
                             _sentence(closer)])
            text += "".join(t for t in tail if t.startswith("\n"))
        text = "\n".join(line.rstrip() for line in text.splitlines()).strip()
        if lowercase:
            text = casual_case(text)
        return Realization(initial_request=text, hidden_items=hidden, opener=opener, closer=closer)
