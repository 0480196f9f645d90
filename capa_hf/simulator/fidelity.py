"""Fidelity checks on every message an LLM simulated user writes. Pure functions.

A message must
- say something (`not_empty`) and stay short (`length`: at most `max_words` words);
- hold no code: no fenced block (`no_code_fence`) and no line of the reference solution
  (`no_reference_line`: a code line of at least 16 characters with a bracket or `=`, compared
  with whitespace collapsed; docstrings and comments are not code lines);
- not parrot its instructions (`no_prompt_echo`: no run of ECHO_WORDS words from the fixed text
  of the expression agent's prompts), which breaks character;
- convey the focus (`conveys_focus`): at least one of the focus clarification's distinctive
  words or literals (a deliberately low bar: it catches a message that says nothing of the
  focus, so `revealed` stays true), or half the words of the failing check it must quote;
- reveal no unrevealed hidden item other than the planner's focus (`no_other_item`): the share
  of that item's *distinctive* words and literals that the message repeats. Distinctive means
  not in the focus's own clarification, not already said (the request and the user's earlier
  messages), not the persona's stock phrases, not generic task words. Literals (numerals and
  quoted values) weigh double. A share of LEAK_SHARE or more, over at least LEAK_MIN_HITS hits,
  is a leak.
A failing message is regenerated once, then replaced by the scripted user's (llm_user.py).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from capa_hf.schema import HiddenItem, Persona
from capa_hf.simulator.similarity import tokens
from capa_hf.text_literals import literals

MAX_WORDS = 120
LEAK_SHARE = 0.5
LEAK_MIN_HITS = 3
LITERAL_WEIGHT = 2
MIN_CODE_LINE = 16
GENERIC = frozenset(tokens("return returns list string number numbers integer value values element elements input "
                           "output result given take takes one two get gets back each every item items function "
                           "want need make sure please thing things case cases code work works"))
FENCES = ("```", "~~~")
ECHO_WORDS = 6
CHECK_NAMES = ("not_empty", "length", "no_code_fence", "no_reference_line", "no_prompt_echo", "conveys_focus",
               "no_other_item")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


def _squash(text: str) -> str:
    return " ".join(text.split())


def code_lines(reference: str) -> list[str]:
    """The lines of the reference that are code a user must never paste."""
    skip: set[int] = set()
    try:
        tree = ast.parse(reference)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                    isinstance(getattr(body[0], "value", None), ast.Constant) and \
                    isinstance(body[0].value.value, str):
                skip.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    out = []
    for n, line in enumerate(reference.splitlines(), 1):
        s = _squash(line.split("#", 1)[0] if not ("'" in line or '"' in line) else line)
        if n in skip or len(s) < MIN_CODE_LINE or not re.search(r"[()\[\]=]", s):
            continue
        out.append(s)
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def echo_grams(templates: Iterable[str], n: int = ECHO_WORDS) -> frozenset[tuple[str, ...]]:
    """Every run of n words of the templates' fixed text (never across a $slot)."""
    grams = set()
    for t in templates:
        for part in re.split(r"\$\w+", t):
            w = _words(part)
            grams.update(tuple(w[i:i + n]) for i in range(len(w) - n + 1))
    return frozenset(grams)


def echoed(message: str, grams: frozenset[tuple[str, ...]], n: int = ECHO_WORDS) -> str | None:
    w = _words(message)
    return next((" ".join(w[i:i + n]) for i in range(len(w) - n + 1) if tuple(w[i:i + n]) in grams), None)


def persona_stock(persona: Persona) -> frozenset[str]:
    """Words of the persona's stock phrases (wraps, openers, closers, reactions)."""
    v = persona.voice
    return tokens(" ".join([*v.clarification_wraps, *v.openers, *v.closers, *v.failure_reactions]))


def leak_score(message: str, item_text: str, known: frozenset[str], known_literals: set[str]) -> tuple[float, int]:
    """(weighted share of the item's distinctive words and literals the message repeats, hits)."""
    words = {w for w in tokens(item_text) - known - GENERIC if not w.isdigit()}
    lits = {x for x in literals(item_text) if x not in known_literals}
    total = len(words) + LITERAL_WEIGHT * len(lits)
    if not total:
        return 0.0, 0
    said = tokens(message)
    word_hits = len(words & said)
    lit_hits = sum(1 for x in lits if re.search(r"(?<![\w.])" + re.escape(x) + r"(?![\w])", message))
    hits = word_hits + LITERAL_WEIGHT * lit_hits
    return hits / total, hits


def message_checks(message: str, *, reference: str, items: Iterable[HiddenItem], focus: str | None,
                   revealed: Iterable[str], said_before: Sequence[str], persona: Persona,
                   max_words: int = MAX_WORDS, echo: frozenset[tuple[str, ...]] = frozenset(),
                   failing: str | None = None) -> list[Check]:
    """Every fidelity check on one message, in CHECK_NAMES order. `focus` is the item id to convey
    (None for the failing check or nothing left); `failing` the failing check the message must
    quote (focus "failing_test")."""
    items = list(items)
    out = [Check("not_empty", bool(message.strip()), "" if message.strip() else "the message is empty")]
    n_words = len(message.split())
    out.append(Check("length", n_words <= max_words, "" if n_words <= max_words else
                     f"{n_words} words (at most {max_words})"))
    fence = next((f for f in FENCES if f in message), None)
    out.append(Check("no_code_fence", fence is None, "" if fence is None else f"holds a code fence {fence}"))
    flat = _squash(message)
    pasted = [line for line in code_lines(reference) if line in flat]
    out.append(Check("no_reference_line", not pasted, f"pastes reference line {pasted[0][:80]!r}" if pasted else ""))
    run = echoed(message, echo)
    out.append(Check("no_prompt_echo", run is None, f"repeats its instructions: {run!r}" if run else ""))
    focus_item = next((h for h in items if h.id == focus), None)
    stock = persona_stock(persona)
    out.append(_conveys(message, focus_item.clarification if focus_item else None, failing, stock))
    known_text = " ".join([*(said_before or ()), focus_item.clarification if focus_item else ""])
    known = tokens(known_text) | stock
    known_lits = literals(known_text)
    leaks = []
    done = set(revealed)
    for h in items:
        if h.id == focus or h.id in done:
            continue
        share, hits = leak_score(message, h.clarification, known, known_lits)
        if share >= LEAK_SHARE and hits >= LEAK_MIN_HITS:
            leaks.append(f"{h.id} ({share:.2f} of its distinctive words and literals)")
    out.append(Check("no_other_item", not leaks, ("reveals " + ", ".join(leaks)) if leaks else ""))
    return out


def _conveys(message: str, clarification: str | None, failing: str | None, stock: frozenset[str]) -> Check:
    if failing:
        want = tokens(failing)
        share = len(want & tokens(message)) / len(want) if want else 1.0
        return Check("conveys_focus", share >= 0.5, "" if share >= 0.5 else "does not quote the failing check")
    if clarification is None:
        return Check("conveys_focus", True)
    _, hits = leak_score(message, clarification, stock, set())
    words = {w for w in tokens(clarification) - stock - GENERIC if not w.isdigit()}
    ok = hits >= 1 or not (words or literals(clarification))
    return Check("conveys_focus", ok, "" if ok else "says nothing of the focus's clarification")


def failed(checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]
