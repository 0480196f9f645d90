"""Stage 3: cross-session consistency checks. Pure functions over one session and its cell.

A session is accepted when the request keeps the persona's voice, both of the cell's mechanisms
act on it (or the plan could only use one: a counted relaxation), no hidden item is stated by
the visible text, no sentence repeats, and its Stage 2 trace resolved, and (reference assistant) every question it asked got the answer it
asked for, with no question asked twice word for word, and each wrong attempt it scripted
failed the variant's tests in the sandbox before its final code passed. A failing session is
regenerated with the next attempt's seed (pipeline.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

from capa_hf.data_files import read_yaml
from capa_hf.paths import DATA_DIR
from capa_hf.schema import Cell, HiddenItem, Keypoint, Persona
from capa_hf.simulator.reply_lines import answered
from capa_hf.simulator.similarity import tokens
from capa_hf.text_literals import literals

CHECKS = ("persona_voice", "both_mechanisms", "no_leak", "no_repeat", "resolved", "answers_asked",
          "wrong_attempts", "no_joins")
# content words too common in task descriptions to say anything about a hidden rule
GENERIC = frozenset(tokens("return returns list string number integer value element input output result given "
                           "take takes one two get gets back each every item"))
OVERLAP_LEAK = 0.85      # share of a hidden fact's distinctive words that one visible sentence may not reach
OVERLAP_MIN_WORDS = 4


def norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower()).split())


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


@lru_cache(maxsize=1)
def convention_leak_terms() -> dict:
    return read_yaml(DATA_DIR / "convention_leaks.yaml")


def check_voice(request: str, persona: Persona) -> CheckResult:
    n = norm(request)
    has_open = any(norm(o) in n for o in persona.voice.openers)
    has_close = any(norm(c) in n for c in persona.voice.closers)
    ok = has_open and has_close
    return CheckResult("persona_voice", ok, "" if ok else "request lacks the persona's opener or closer")


def check_mechanisms(hidden: tuple[HiddenItem, ...], cell: Cell, allow_single: bool = False) -> CheckResult:
    seen = {h.mechanism for h in hidden}
    ok = seen == set(cell.mechanisms) or (allow_single and bool(seen) and seen <= set(cell.mechanisms))
    return CheckResult("both_mechanisms", ok, "" if ok else f"hidden items use {sorted(seen)}")


def sentences(text: str) -> list[str]:
    """The sentences of a message; list markers ("1.", "-") are not sentences of their own."""
    text = re.sub(r"(?m)^\s*(?:\d+\.|[-*])\s+", "", text)
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def check_repeats(request: str) -> CheckResult:
    seen, dup = set(), []
    for s in sentences(request):
        key = norm(s)
        if len(key) > 3 and key in seen:
            dup.append(s)
        seen.add(key)
    return CheckResult("no_repeat", not dup, f"repeated: {dup[:2]}" if dup else "")


def overlap(fact: str, sentence_text: str) -> tuple[float, int]:
    """Share of the fact's distinctive content words found in one sentence, and their number."""
    fw = {w for w in tokens(fact) - GENERIC if not w.isdigit()}   # numerals: the literal check's business
    if not fw:
        return 0.0, 0
    hit = fw & tokens(sentence_text)
    return len(hit) / len(fw), len(hit)


def task_item_leaks(request_wo_item: str, kp: Keypoint, visible: str) -> list[str]:
    """What of a hidden keypoint shows in the request (without the item's own obscured phrase):
    its plain or original text, a literal of its original text that nothing visible accounts
    for, or one sentence that carries most of its distinctive words."""
    found = []
    n_req = norm(request_wo_item)
    n_vis = norm(visible)
    for label, text in (("plain", kp.plain), ("original_text", kp.original_text)):
        n = norm(text)
        if len(n) >= 12 and n in n_req and n not in n_vis:   # what visible text says anyway is no leak
            found.append(label)
    req = re.sub(r"O\([^)]*\)", " ", re.sub(r"(?m)^\s*\d+\.\s", "", request_wo_item))
    for lit in literals(kp.original_text):
        if re.search(r"(?<![\w.])" + re.escape(lit) + r"(?![\w])", visible):
            continue
        pattern = (r"['\"`]" + re.escape(lit) + r"['\"`]") if lit.isalpha() else (
            r"(?<![\w.])" + re.escape(lit) + r"(?![\w])")
        if re.search(pattern, req):
            found.append(f"literal {lit!r}")
    for s in sentences(request_wo_item):
        share, n = overlap(kp.plain, s)
        if share >= OVERLAP_LEAK and n >= OVERLAP_MIN_WORDS:
            found.append(f"stated by {s[:60]!r}")
            break
    return found


def convention_leaks(request_wo_item: str, dimension: str, value: str) -> list[str]:
    terms = convention_leak_terms().get(dimension, {}).get(value, [])
    found = []
    for t in terms:
        flags = 0 if any(ch.isupper() for ch in t) else re.IGNORECASE   # None, ValueError: as written
        if re.search(r"(?<![\w-])" + re.escape(t) + r"(?![\w-])", request_wo_item, flags):
            found.append(f"term {t!r}")
    return found


def contradictions(text: str, values: dict[str, str]) -> list[str]:
    """Terms of another value of a dimension the session's variant sets (e.g. "as a list" when the
    user wants tuples): the request and the clarifications must never say the opposite."""
    out = []
    for dim, value in values.items():
        for other in convention_leak_terms().get(dim, {}):
            if other != value:
                out += [f"{dim}={other} {w}" for w in convention_leaks(text, dim, other)]
    return out


def check_leaks(request: str, hidden: tuple[HiddenItem, ...], keypoints: dict[str, Keypoint],
                values: dict[str, str], visible_texts: list[str]) -> CheckResult:
    """No hidden item is stated by the visible text (the request minus that item's own phrase),
    and nothing the user says contradicts the session's convention values."""
    problems = [f"contradicts {c}" for c in contradictions(request, values)]
    for h in hidden:
        problems += [f"{h.id} clarification contradicts {c}" for c in contradictions(h.clarification, values)]
    visible = " ".join(visible_texts)
    for h in hidden:
        rest = request.replace(h.obscured_as, " ") if h.obscured_as else request
        if h.kind == "task":
            for what in task_item_leaks(rest, keypoints[h.keypoint_id], visible):
                problems.append(f"{h.id}:{what}")
        else:
            for what in convention_leaks(rest, h.dimension, values[h.dimension]):
                problems.append(f"{h.id}({h.dimension}):{what}")
            if h.keypoint_id:
                for what in task_item_leaks(rest, keypoints[h.keypoint_id], visible)[:1]:
                    if not what.startswith("stated"):
                        problems.append(f"{h.id}:{what}")
    return CheckResult("no_leak", not problems, ", ".join(problems))


def check_resolved(resolved: bool) -> CheckResult:
    return CheckResult("resolved", resolved, "" if resolved else "the session's trace did not pass")


def check_answers(turns, asks, off_item: Mapping[str, str] | None = None, wraps=()) -> CheckResult:
    """Every question of the trace is asked once, each scripted question is about the item it
    asks for, and each one's next user turn reveals that item. `turns` are {"role", "content"}
    mappings; `asks` the script's (clarification, question) pairs; `off_item`: scripted question
    -> the other keypoint it names first (user_data.names_other_item: a question about what the
    result counts, set on the signature item, is answered with the signature line); `wraps`: the
    persona's clarification wraps, whose lead-in or tag an answer may drop (reply_lines.answered)."""
    wanted = {q: a for a, q in asks}
    problems, seen = [], set()
    for q, other in (off_item or {}).items():
        problems.append(f"a question is about {other}, not the item it asks for: {q[:60]!r}")
    for i, t in enumerate(turns):
        if t["role"] != "assistant" or "```" in t["content"]:
            continue
        q = t["content"]
        if q in seen:
            problems.append(f"turn {i + 1} repeats a question")
        seen.add(q)
        nxt = next((u["content"] for u in turns[i + 1:] if u["role"] == "user"), None)
        if q in wanted and nxt is not None and not answered(wanted[q], nxt, wraps):
            problems.append(f"turn {i + 2} does not answer the question of turn {i + 1}")
    return CheckResult("answers_asked", not problems, "; ".join(problems))


# words after which a failure report must be a noun phrase, not a clause
OBJECT_WORDS = "with|on|of|from|by|about|at|got|get|see|saw"


def _form_pattern(template: str) -> str | None:
    """A `what_happened` line as a regex (None for one that opens with a bare slot, which would
    match anything): a quoted line is one code span, an exception one word, a message one line."""
    if template.startswith(("{exception}", "{message}")):
        return None
    out = re.escape(template)
    for slot, rx in (("`{line}`", "`[^`\\n]*`"), ("{line}", "[^\\n]+?"), ("{exception}", "[A-Za-z_.]+"),
                     ("{message}", "[^\\n]+?")):
        out = out.replace(re.escape(slot), rx)
    return out


def check_joins(turns, clause_forms) -> CheckResult:
    """No user turn joins two templates into a broken sentence: a failure report written as a
    clause (`clause_forms`: the user_lines `what_happened` lines, "the check `X` gets a different
    result") after a word that needs a noun phrase ("It fails with the result is wrong at ..."),
    or a clause report inside another ("failed with the check `X` gets ...")."""
    forms = [p for p in dict.fromkeys(_form_pattern(f) for f in clause_forms if f) if p]
    pattern = re.compile(r"(?i)\b(?:" + OBJECT_WORDS + r") (?:" + "|".join(forms) + ")") if forms else None
    problems = []
    for i, t in enumerate(turns):
        if t["role"] == "user" and pattern is not None:
            m = pattern.search(t["content"])
            if m:
                problems.append(f"turn {i + 1} joins two lines: {m.group(0)[:70]!r}")
    return CheckResult("no_joins", not problems, "; ".join(problems))


def check_attempts(passed: list[bool], wrong: int) -> CheckResult:
    """The reference assistant scripted `wrong` wrong attempts before its final code: the trace
    has that many submissions plus one, every one but the last failed its judge (the sandbox on
    the variant's tests) and the last passed. `passed`: each submission's verdict, in order."""
    if len(passed) == wrong + 1 and not any(passed[:-1]) and passed[-1]:
        return CheckResult("wrong_attempts", True)
    return CheckResult("wrong_attempts", False, f"{wrong} scripted wrong attempt(s) before the final code, "
                       f"but the submissions judged {['pass' if p else 'fail' for p in passed]}")
