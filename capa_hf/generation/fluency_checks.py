"""Mechanical fluency checks on a Stage 1 request: the slips a blind review found that a rule can see.

Each function returns the offending words (empty when the text is clean), so a test or a build
report can quote them:
- `swap_slips`: a domain-cognitive swap that breaks the text: a field noun that runs into another
  field noun ("flagged initial initials") or follows a CS noun it was compounded with ("digit
  consolidated total"), two field nouns of one request where one contains the
  other ("glyph" and "alphabetic glyph", whose glosses then disagree), more than `MAX_SWAPS`
  field nouns, or a field noun that does not name the same thing as its entity (`same_meaning`);
- `gloss_slips`: a field noun glossed more than once in a session, or glossed but never used;
- `template_slips`: a filled template that echoes or disagrees with its slot ("sort the sorted
  words", "the two lists is empty", "how many of them qualify as an integer");
- `operator_slips`: an operator stand-in that asks for results on data the assistant cannot see
  ("just run it on my data and tell me what you get") or says it can see the user's screen;
- `field_slips`: a convention stand-in that appeals to a whole field by name ("do what's normally
  done in freight") rather than to the persona's own records;
- `empty_slips`: "the empty result" for a task whose empty result is a bool, a number or a string;
- `stiff_slips`: stock phrasings the review called stiff or false ("every term here means what it
  always means", "about that many");
- `foreign_words`: words that belong to another persona's work or register (persona_voice.yaml
  `owned`): a freshman's "pipeline", an auditor's "OK, give me something I can run".
"""

from __future__ import annotations

import re

from capa_hf.generation.persona_voice import persona_voice
from capa_hf.generation.stage1_lexicon import MAX_SWAPS, SWAPPABLE, TYPE_WORDS, Mapping, same_meaning

TEMPLATE_SLIPS = (
    re.compile(r"\b(?:an?|the) (?:empty |new |same )?the\b", re.IGNORECASE),    # "an empty the string"
    re.compile(r"\b(?:sort|order|rank) the sorted\b", re.IGNORECASE),
    re.compile(r"\bqualify as an? (?:integer|number|string)\b", re.IGNORECASE),
    re.compile(r"(?<!\bof )\b(?:the|two|both) (?:\w+ )?(?!\w*(?:ss|is|us)\b)\w+s (?:is|has|hits) (?:empty|nothing)\b",
               re.IGNORECASE),
    re.compile(r"\b(?:largest|smallest) value first in the (?:largest|smallest)\b", re.IGNORECASE),
    re.compile(r"\b(?:the )?(?:largest|smallest) \w+ (?:run )?from (?:largest|smallest) to\b", re.IGNORECASE),
    re.compile(r"\bTask\. The task\b"),
    re.compile(r"\bwhat the [\w ]+ and the [\w ]+ means\b", re.IGNORECASE),
    re.compile(r"\b\w+s as it would be packaged\b", re.IGNORECASE),
)
OPERATOR_SLIPS = re.compile(
    r"tell me (?:what you get|the verdict)|report (?:back|what you get)|on my screen|just tell me|"
    r"(?:look|peek) at my (?:data|workspace|records|files)|have a look at my|run it (?:on|against) my|"
    r"you'll see what I mean|you'll know it when|give me the answer|what comes out|send me|fetch \w+ yourself|"
    r"connect to my|hop into my|(?:the|my) data is sitting|go through my (?:records|data|sheet)|"
    r"nothing (?:is )?loaded on my side|on my side is empty|(?:scan|inspect|grab|open up) (?:my|\w+ on my)",
    re.IGNORECASE)
EMPTY_WORDS = re.compile(r"\b(?:the |an |plain |natural )?empty (?:result|answer|one|version)\b|natural empty",
                         re.IGNORECASE)
HABIT_WORDS = re.compile(r"\b(?:always|every|everywhere|never|for me|whatever the task)\b", re.IGNORECASE)
STIFF_SLIPS = re.compile(
    r"means what it always means|nothing exotic:|same definition i always use|loud vowels|about that many|"
    r"right down to the bottom|squared-ish|the team way\b|the treatment we always give them|the way our team always defines it",
    re.IGNORECASE)
# how a gloss names its field noun: in double quotes (stage1_phrases.yaml lexicon_gloss)
_GLOSSED = re.compile(r"\"([^\"\n]+)\"")


def _nouns(mapping: Mapping) -> list[str]:
    return sorted({w for sg, pl in mapping.nouns.values() for w in (sg, pl)}, key=len, reverse=True)


def swap_slips(text: str, mapping: Mapping) -> list[str]:
    """What is wrong with the field nouns `mapping` put into `text`."""
    out: list[str] = []
    entities = set(mapping.nouns)
    if len(entities) > MAX_SWAPS:
        out.append(f"{len(entities)} swapped entities (at most {MAX_SWAPS})")
    safe = same_meaning().get(mapping.lexicon_id, {})
    for entity, (sg, _) in mapping.nouns.items():
        if entity in TYPE_WORDS:
            out.append(f"type word {entity!r} swapped")
        if sg not in safe.get(entity, ()):
            out.append(f"{sg!r} does not name the same thing as {entity!r}")
    nouns = _nouns(mapping)
    if not nouns:
        return out
    any_noun = "|".join(re.escape(n) for n in nouns)
    out += [m.group(0) for m in re.finditer(rf"\b(?:{any_noun})\s+(?:{any_noun})\b", text, re.IGNORECASE)]
    entity_word = "|".join(sorted({w for e in TYPE_WORDS + SWAPPABLE for w in (e, e + "s")}, key=len, reverse=True))
    out += [m.group(0) for m in re.finditer(rf"\b(?:{entity_word})\s+(?:{any_noun})\b", text, re.IGNORECASE)]
    for a in nouns:
        for b in nouns:
            if a != b and re.search(rf"\b{re.escape(a)}\b", b, re.IGNORECASE):
                out.append(f"{a!r} inside {b!r}")
    return out


def gloss_slips(request: str, clarifications: list[str], mapping: Mapping) -> list[str]:
    """Field nouns glossed more than once over a session's clarifications, or glossed but unused."""
    sgs = {sg.lower(): pl.lower() for sg, pl in mapping.nouns.values()}
    seen: dict[str, int] = {}
    for text in clarifications:
        for m in _GLOSSED.finditer(text):
            word = m.group(1).lower()
            if word in sgs:
                seen[word] = seen.get(word, 0) + 1
    out = [f"{w!r} glossed {n} times" for w, n in seen.items() if n > 1]
    return out + [f"{w!r} glossed but never used" for w in seen
                  if not re.search(rf"\b(?:{re.escape(w)}|{re.escape(sgs[w])})\b", request, re.IGNORECASE)]


def template_slips(text: str) -> list[str]:
    return [m.group(0) for p in TEMPLATE_SLIPS for m in p.finditer(text)]


def operator_slips(text: str) -> list[str]:
    return [m.group(0) for m in OPERATOR_SLIPS.finditer(text)]


def field_slips(text: str) -> list[str]:
    """A stand-in that appeals to a persona's whole field by name ("... in freight.", "the
    container logistics would use")."""
    names = sorted(set((persona_voice().fields or {}).values()), key=len, reverse=True)
    if not names:
        return []
    any_name = "|".join(re.escape(n) for n in names)
    pattern = rf"\b(?:in|for|of) (?:{any_name})\s*(?:[.;,]|$)|\b(?:{any_name}) would\b"
    return [m.group(0) for m in re.finditer(pattern, text, re.IGNORECASE)]


def empty_slips(text: str, empty_kind: str | None) -> list[str]:
    """'The empty result' where the task's empty result is a bool, a number or a string."""
    from capa_hf.generation.empty_results import NAMED_KINDS

    if empty_kind not in NAMED_KINDS:
        return []
    # a habit speaks of every task ("the natural empty answer, like zero or an empty list"): only
    # what this request says about its own empty case counts
    said = [t for t in re.split(r"(?<=[.!?])\s+", text) if not HABIT_WORDS.search(t)]
    return [m.group(0) for t in said for m in EMPTY_WORDS.finditer(t)]


def stiff_slips(text: str) -> list[str]:
    return [m.group(0) for m in STIFF_SLIPS.finditer(text)]


def foreign_words(text: str, persona_id: str) -> list[str]:
    return persona_voice().foreign_words(text, persona_id)
