"""Thinking models: the visible answer, stop strings applied after ``</think>``, cut-off detection.

A thinking model (Qwen3, DeepSeek-R1 and the like) writes ``<think> ... </think>`` before
its answer.  Only the text after the last ``</think>`` is the answer; the thinking never
enters :attr:`ChatResult.text` (so it never enters the conversation a later turn sends).

Stop strings are meant for the answer: sent to a backend they also fire inside the
thinking (a model that reasons about a ``<user>`` tag stops there).  So engines do not send
them while thinking is on, and :func:`split_reply` applies them to the visible text after
generation: the answer is cut at the first stop string and the finish reason becomes
``"stop"``, as a server would report it.  A reply that ends while still thinking (no
``</think>``, cut by ``max_tokens``) has no answer: text ``""``, ``cut_in_thinking=True``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def strip_thinking(text: str, expect_thinking: bool = False) -> tuple[str, bool]:
    """Return the answer after the last ``</think>`` and whether thinking was found.

    A reply that is still thinking when it stops (no ``</think>``: cut by ``max_tokens``)
    has no answer yet, so the answer is the empty string.  That is recognised by a leading
    ``<think>``, or, when ``expect_thinking`` (the template opened the think block itself),
    by the missing ``</think>`` alone.
    """
    idx = text.rfind(THINK_CLOSE)
    if idx >= 0:
        return text[idx + len(THINK_CLOSE):].lstrip(), True
    if expect_thinking or text.lstrip().startswith(THINK_OPEN):
        return "", True
    return text, False


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """``text`` up to the earliest stop string (excluded), and whether one was found."""
    best = -1
    for s in stop:
        j = text.find(s)
        if j >= 0 and (best < 0 or j < best):
            best = j
    return (text[:best], True) if best >= 0 else (text, False)


@dataclass(frozen=True)
class Reply:
    text: str               # the visible answer
    finish_reason: str      # "stop" | "length" (or the backend's "error")
    thinking: str           # the thinking text ("" when none)
    cut_in_thinking: bool   # the reply ended before ``</think>``


_FENCED = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def cut_after_fence(text: str, needle: str | None) -> str | None:
    """``text`` up to and including the closing fence of its first fenced block whose body holds
    ``needle``; None when no such block has closed yet (or ``needle`` is None)."""
    if not needle or "```" not in text:
        return None
    for m in _FENCED.finditer(text):
        if needle in m.group(1):
            return text[:m.end()]
    return None


def split_reply(raw: str, finish_reason: str, *, stop: Sequence[str] = (), expect_thinking: bool = False,
                strip: bool = True, stop_after_fence: str | None = None) -> Reply:
    """Split a raw completion into its visible answer and thinking, then apply ``stop``.

    A reply that opens ``<think>`` and never closes it was cut inside the thinking.  With
    ``expect_thinking`` (thinking was on; some templates open the block themselves, so the
    reply has only ``</think>``) a ``length`` reply without ``</think>`` counts as cut too; a
    reply that ended normally with no think markers at all is taken as a plain answer.
    ``strip=False`` keeps the raw text (no thinking split) and only applies the stop strings.
    ``stop_after_fence`` then ends the visible text after its first closed code block holding it.
    """
    thinking, cut = "", False
    text = raw
    if strip:
        idx = raw.rfind(THINK_CLOSE)
        if idx >= 0:
            thinking = raw[:idx].replace(THINK_OPEN, "", 1).strip()
            text = raw[idx + len(THINK_CLOSE):].lstrip()
        elif raw.lstrip().startswith(THINK_OPEN) or (expect_thinking and finish_reason == "length"):
            thinking = raw.replace(THINK_OPEN, "", 1).strip()
            text, cut = "", True
    if not cut and stop:
        text, hit = cut_at_stop(text, stop)
        if hit and finish_reason != "error":
            finish_reason = "stop"
    if not cut and stop_after_fence:
        head = cut_after_fence(text, stop_after_fence)
        if head is not None:
            text = head
            if finish_reason != "error":
                finish_reason = "stop"
    return Reply(text=text, finish_reason=finish_reason, thinking=thinking, cut_in_thinking=cut)


def template_thinks(chat_template: str | None) -> bool:
    """Whether a chat template knows a think block (Qwen3's ``enable_thinking``, ``<think>``)."""
    return bool(chat_template) and ("enable_thinking" in chat_template or THINK_OPEN in chat_template)
