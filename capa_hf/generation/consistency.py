"""Stage 3: cross-session consistency checks. Pure functions over one session and its cell."""

from __future__ import annotations

import re
from dataclasses import dataclass

from capa_hf.schema import Cell, HiddenItem, Keypoint, Persona
from capa_hf.text_literals import literals

CHECKS = ("persona_voice", "both_mechanisms", "no_leak", "resolved")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]+", " ", text.lower()).split())


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


def check_voice(request: str, persona: Persona) -> CheckResult:
    norm = _norm(request)
    has_open = any(_norm(o) in norm for o in persona.voice.openers)
    has_close = any(_norm(c) in norm for c in persona.voice.closers)
    return CheckResult("persona_voice", has_open and has_close,
                       "" if has_open and has_close else "request lacks the persona's opener or closer")


def check_mechanisms(hidden: tuple[HiddenItem, ...], cell: Cell) -> CheckResult:
    seen = {h.mechanism for h in hidden}
    ok = seen == set(cell.mechanisms)
    return CheckResult("both_mechanisms", ok, "" if ok else f"hidden items use {sorted(seen)}")


def leaked(request: str, hidden_kp: Keypoint, visible_texts: list[str]) -> list[str]:
    """What of a hidden keypoint shows in the request: its plain or original text, or a literal
    of its original text that nothing visible accounts for."""
    found = []
    norm_req = _norm(request)
    visible = " ".join(visible_texts)
    norm_visible = _norm(visible)
    for label, text in (("plain", hidden_kp.plain), ("original_text", hidden_kp.original_text)):
        n = _norm(text)
        if len(n) >= 12 and n in norm_req and n not in norm_visible:
            found.append(label)
    # list numbering and complexity notation are framing, not task literals
    request = re.sub(r"O\([^)]*\)", " ", re.sub(r"(?m)^\s*\d+\.\s", "", request))
    for lit in literals(hidden_kp.original_text):
        if len(lit) < 1 or re.search(r"(?<![\w.])" + re.escape(lit) + r"(?![\w])", visible):
            continue
        if lit.isalpha():  # a quoted word leaks only when it is quoted again, not as plain English
            pattern = r"['\"`]" + re.escape(lit) + r"['\"`]"
        else:
            pattern = r"(?<![\w.])" + re.escape(lit) + r"(?![\w])"
        if re.search(pattern, request):
            found.append(f"literal {lit!r}")
    return found


def check_leaks(request: str, hidden: tuple[HiddenItem, ...], keypoints: dict[str, Keypoint],
                visible_texts: list[str]) -> CheckResult:
    problems = []
    for h in hidden:
        for what in leaked(request, keypoints[h.keypoint_id], visible_texts):
            problems.append(f"{h.id}:{what}")
    return CheckResult("no_leak", not problems, ", ".join(problems))


def check_resolved(resolved: bool) -> CheckResult:
    return CheckResult("resolved", resolved, "" if resolved else "the session's trace did not pass")
