"""How the scripted user's reply is put together from its lines. Pure.

- Several answers in one message (a question in several parts): an answer that opens or closes
  with the same lead-in or tag as the first ("As it has always worked here: ...") drops it, so a
  message holds each lead-in once.
- `answered`: whether a message gives an answer, whole or without the lead-in or tag it dropped.
- A failure reaction's {error} slot is filled to fit where it stands (`fill_error`; a subject
  slot gets a noun phrase), and each part of a message ends its sentence (`end_sentence`).
- A reply to an assistant move ("Right, you can't see my machine.") is said only when the
  assistant's turn just before made that move (`made_move`).
"""

from __future__ import annotations

import re
from typing import Sequence

_BOUNDARY = re.compile(r"(?<=[.:!?])\s+")
MIN_BODY = 12          # an answer's body, without lead-in or tag, is at least this long


def _cuts(text: str) -> list[int]:
    """Where a lead-in may end or a tag begin: after each sentence or colon inside the text."""
    return [m.end() for m in _BOUNDARY.finditer(text) if m.end() < len(text)]


def lead_in(text: str, other: str) -> str:
    """The first sentence (or the text up to a colon) when `other` opens with it too, else ""."""
    cuts = _cuts(text)
    head = text[:cuts[0]] if cuts else ""
    return head if head and other.startswith(head) and len(text) - len(head) >= MIN_BODY else ""


def tag(text: str, other: str) -> str:
    """The last sentence when `other` closes with it too, else ""."""
    cuts = _cuts(text)
    tail = text[cuts[-1]:] if cuts else ""
    return tail if tail and other.endswith(tail.strip()) and cuts[-1] >= MIN_BODY else ""


def join_answers(texts: Sequence[str]) -> str:
    """The answers in one message; a later one drops the lead-in and tag it shares with the first."""
    texts = [t.strip() for t in texts if t.strip()]
    if not texts:
        return ""
    first, out, closing = texts[0], [texts[0]], ""
    for t in texts[1:]:
        head, tail = lead_in(t, first), tag(t, first)
        body = t[len(head):len(t) - len(tail)].strip()
        if len(body) < MIN_BODY:
            body, tail = t, ""
        closing = closing or tail.strip()
        out.append(body)
    if closing and len(first) - len(closing) >= MIN_BODY:   # a shared tag ("Nothing more.") closes the message
        out[0] = first[:len(first) - len(closing)].strip()
        out.append(closing)
    return " ".join(out)


def answered(answer: str, text: str, wraps: Sequence[str] = ()) -> bool:
    """Whether `text` gives `answer`: whole, or without its first sentence (a lead-in) and/or its
    last (a tag), as join_answers drops them when shared (so what was dropped is in `text` too),
    or without a lead-in or tag of the persona's clarification `wraps`, as strip_wrap drops them."""
    if answer in text:
        return True
    heads, tails = wrap_pieces(wraps)
    low = text.lower()
    if heads or tails:      # as strip_wrap leaves it ("<clarification>" needs no sentence break)
        for drop_head, drop_tail in ((True, False), (False, True), (True, True)):
            body = strip_wrap(answer, heads, tails, drop_head, drop_tail)
            if body != answer.strip() and body.lower() in low:
                return True
    cuts = _cuts(answer)
    if not cuts:
        return False
    pieces = {p.lower() for p in (*heads, *tails)}

    def gone(piece: str) -> bool:
        return not piece or piece.lower() in low or piece.lower() in pieces

    for a in (0, *cuts[:2]):
        for b in (*cuts[-2:], len(answer)):
            body, head, tail = answer[a:b].strip(), answer[:a].strip(), answer[b:].strip()
            if (a, b) != (0, len(answer)) and b > a and len(body) >= MIN_BODY and body.lower() in low \
                    and gone(head) and gone(tail):
                return True
    return False


def wrap_pieces(wraps: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The lead-ins and tags of a persona's clarification wraps ("Put computationally: {text}",
    "{text} No other behaviour is authorized."), longest first."""
    heads = {w.split("{text}")[0].strip() for w in wraps if "{text}" in w}
    tails = {w.split("{text}")[1].strip() for w in wraps if "{text}" in w}
    return (tuple(sorted((h for h in heads if h), key=len, reverse=True)),
            tuple(sorted((t for t in tails if t), key=len, reverse=True)))


def strip_wrap(text: str, heads: Sequence[str], tails: Sequence[str], drop_head: bool, drop_tail: bool,
               said: str = "") -> str:
    """An answer without its wrap's lead-in (when `drop_head`, or when `said` holds it already)
    and its tag (likewise): one lead-in a message, and no stock phrase twice a session. The text
    is kept whole when too little would be left."""
    low_said = said.lower()
    out = text.strip()
    for h in heads:
        if out.lower().startswith(h.lower()) and (drop_head or h.lower() in low_said):
            out = out[len(h):].lstrip()
            break
    for t in tails:
        if out.lower().endswith(t.lower()) and (drop_tail or t.lower() in low_said):
            out = out[:len(out) - len(t)].rstrip()
            break
    if len(out) < MIN_BODY:
        return text.strip()
    return out[:1].upper() + out[1:] if text.strip()[:1].isupper() else out


def made_move(reply: str, cues: Sequence[str]) -> bool:
    """Whether an assistant turn says one of the cue phrases (lowercase, apostrophes straightened)."""
    low = (reply or "").lower().replace("’", "'")
    return any(c in low for c in cues)


_AFTER_SLOT = re.compile(r"\{error\}(?= ([a-z]+))")
_BEFORE_SLOT = re.compile(r"([A-Za-z]+) \(?\{error\}")
# words after which the slot is an object: a clause ("the check ... gets a different result")
# cannot stand there, a noun phrase ("the failing check `...`") can
NOUN_SLOT_AFTER = frozenset({"with", "on", "of", "from", "by", "about", "at", "got", "get", "see", "saw"})
JOINING_WORDS = frozenset({"and", "or", "but"})
SUBJECT_VERBS = frozenset({"tells", "shows", "means", "says", "proves"})
_END = re.compile(r"[.!?:)>\]]$")


def slot_role(template: str) -> str:
    """How a reaction uses its {error} slot: "subject" when it needs a noun phrase ("{error}
    tells me ...", or after a preposition or an object verb: "fails with {error}", "Got {error}"),
    "clause" (a lowercase word follows that is no conjunction: a comma must part them), or
    "plain"."""
    before = _BEFORE_SLOT.search(template)
    if before and before.group(1).lower() in NOUN_SLOT_AFTER:
        return "subject"
    m = _AFTER_SLOT.search(template)
    if not m:
        return "plain"
    word = m.group(1)
    return "subject" if word in SUBJECT_VERBS else "plain" if word in JOINING_WORDS else "clause"


def fill_error(template: str, error: str) -> str:
    """The reaction with its {error} slot filled: a clause that runs on into the template's own
    words gets a comma, and a slot that opens a sentence opens with a capital when the persona
    writes capitals at all."""
    if slot_role(template) == "clause":
        template = template.replace("{error} ", "{error}, ", 1)
    template = re.sub(r"\{error\} (?=[A-Z])", "{error}. ", template)   # "{error} Ask yourself ..."
    opens = template.startswith("{error}") or re.search(r"[.!?] \{error\}", template)
    if opens and any(c.isupper() for c in template.replace("{error}", "")):
        error = error[:1].upper() + error[1:]
    return template.format(error=error)


def end_sentence(text: str) -> str:
    """A part of a message that does not run on into the next: a final stop where none is."""
    text = text.strip()
    return text if not text or _END.search(text) else text + "."
