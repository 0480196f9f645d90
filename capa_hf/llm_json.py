"""Asking a model for one JSON object, with one corrective retry.

Every LLM component of CAPA that answers in JSON (the user's planner, the judge's veto, the
Stage 3 consistency check, keypoint extraction) goes through `ask_json`: a generator that yields
`runners.Call`s (so the lock-step driver batches it with everything else), parses the first
JSON object of the reply, validates it, and on failure asks once more with the error named. It
returns the value (None when both answers failed) and every attempt, for the logs.

An engine error is not an answer: it raises `LLMCallError`, which the episode turns into an
incomplete record (retried by a rerun), never into a silent fallback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generator

from runners.driver import Call
from runners.types import derive_seed

from capa_hf.errors import CapaError
from capa_hf.prompts import fill

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)


class LLMCallError(CapaError):
    """An engine failed on a call a CAPA component made (not a bad answer: an error)."""


@dataclass
class JsonAnswer:
    value: Any | None
    attempts: list[dict] = field(default_factory=list)   # {"text", "error"} per call

    @property
    def ok(self) -> bool:
        return self.value is not None

    @property
    def retried(self) -> bool:
        return len(self.attempts) > 1


def first_json_object(text: str) -> tuple[Any | None, str | None]:
    """The first JSON object in `text` (inside a fence or bare), or None and why not."""
    if not text or not text.strip():
        return None, "the reply is empty"
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for chunk in candidates:
        for start in [i for i, ch in enumerate(chunk) if ch == "{"][:20]:
            try:
                value, _ = decoder.raw_decode(chunk[start:])
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value, None
    return None, "the reply holds no JSON object"


def check_result(result: Any, what: str) -> str:
    """The reply text, or LLMCallError when the engine failed."""
    if result is None or not getattr(result, "ok", False):
        raise LLMCallError(f"{what}: engine error: {getattr(result, 'error', None) or 'no result'}")
    return getattr(result, "text", "") or ""


def ask_json(call: Call, validate: Callable[[dict], str | None], what: str,
             retries: int = 1) -> Generator[Call, Any, JsonAnswer]:
    """Yield `call`; parse and `validate` the reply (None = valid, else the problem); on a
    problem, retry `retries` times with the reply and the problem in the conversation."""
    answer = JsonAnswer(None)
    messages = list(call.messages)
    for attempt in range(retries + 1):
        sampling = call.sampling if attempt == 0 else replace(
            call.sampling, seed=derive_seed(call.sampling.seed, what, attempt))
        result = yield replace(call, messages=messages, sampling=sampling)
        text = check_result(result, what)
        value, error = first_json_object(text)
        if error is None:
            try:
                error = validate(value)
            except Exception as exc:   # a validator that trips on a strange value: still a bad answer
                error = f"{type(exc).__name__}: {exc}"
        answer.attempts.append({"text": text, "error": error})
        if error is None:
            answer.value = value
            return answer
        messages = messages + [{"role": "assistant", "content": text or "(empty)"},
                               {"role": "user", "content": fill("llm_json_retry", problem=error)}]
    return answer


def strict_bool(value: dict, key: str) -> str | None:
    """None when `value[key]` is a JSON boolean, else the problem."""
    if key not in value:
        return f'the object has no "{key}" field'
    if not isinstance(value[key], bool):
        return f'"{key}" must be true or false, got {value[key]!r}'
    return None


def reason_of(value: dict | None, key: str = "reason") -> str:
    text = (value or {}).get(key)
    return str(text).strip()[:500] if text is not None else ""
