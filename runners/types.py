"""Plain data types shared by every engine: sampling settings, requests, results.

A conversation is a sequence of ``{"role": ..., "content": ...}`` messages.  Inside a
:class:`ChatRequest` it is stored as a tuple of ``(role, content)`` pairs so that requests
are hashable and immutable; :meth:`ChatRequest.from_messages` builds one from the usual
``list[dict]`` form and :meth:`ChatRequest.message_dicts` turns it back.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable, Mapping, Sequence

Message = Mapping[str, str]

FINISH_REASONS = ("stop", "length", "error")


@dataclass(frozen=True)
class Sampling:
    """Decoding settings for one request.  Greedy by default."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = 0
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        stop = self.stop
        if isinstance(stop, str):
            stop = (stop,)
        stop = tuple(stop)
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"Sampling.stop must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        if not (isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature)
                and self.temperature >= 0):
            raise ValueError(f"Sampling.temperature must be a finite number >= 0, got {self.temperature!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"Sampling.top_p must be in (0, 1], got {self.top_p!r}")
        if not (isinstance(self.max_tokens, int) and not isinstance(self.max_tokens, bool)
                and self.max_tokens >= 1):
            raise ValueError(f"Sampling.max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"Sampling.seed must be an int or None, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sampling":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown Sampling field(s): {sorted(unknown)}")
        return cls(**{k: (tuple(v) if k == "stop" else v) for k, v in d.items()})


def _normalize_messages(messages: Iterable[Any]) -> tuple[tuple[str, str], ...]:
    if isinstance(messages, (str, bytes)) or isinstance(messages, Mapping):
        raise ValueError("messages must be a sequence of {'role': ..., 'content': ...} mappings")
    out: list[tuple[str, str]] = []
    for i, m in enumerate(messages):
        if isinstance(m, Mapping):
            role, content = m.get("role"), m.get("content")
            extra = set(m) - {"role", "content"}
            if extra:
                raise ValueError(f"message {i} has unsupported key(s) {sorted(extra)}; "
                                 "only 'role' and 'content' are supported")
        elif isinstance(m, (tuple, list)) and len(m) == 2:
            role, content = m
        else:
            raise ValueError(f"message {i} must be a mapping with 'role' and 'content', got {m!r}")
        if not isinstance(role, str) or not role:
            raise ValueError(f"message {i} has no valid 'role' (got {role!r})")
        if not isinstance(content, str):
            raise ValueError(f"message {i} ({role}) 'content' must be a string, got {type(content).__name__}")
        out.append((role, content))
    if not out:
        raise ValueError("a conversation needs at least one message")
    return tuple(out)


@dataclass(frozen=True)
class ChatRequest:
    """One conversation to continue: its messages and the sampling settings."""

    messages: tuple[tuple[str, str], ...]
    sampling: Sampling = field(default_factory=Sampling)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _normalize_messages(self.messages))
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"ChatRequest.sampling must be a Sampling, got {type(self.sampling).__name__}")

    @classmethod
    def from_messages(cls, messages: Sequence[Message], sampling: Sampling | None = None) -> "ChatRequest":
        return cls(messages=_normalize_messages(messages), sampling=sampling or Sampling())

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]

    def messages_json(self) -> str:
        """Canonical serialization of the messages (also used to order batches by prefix)."""
        return messages_json(self.messages)

    @property
    def last_user_message(self) -> str | None:
        for role, content in reversed(self.messages):
            if role == "user":
                return content
        return None


def messages_json(messages: Sequence[tuple[str, str]] | Sequence[Message]) -> str:
    pairs = [(m["role"], m["content"]) if isinstance(m, Mapping) else tuple(m) for m in messages]
    return json.dumps(pairs, ensure_ascii=False, separators=(",", ":"))


def prefix_order_key(request: ChatRequest) -> tuple:
    """Sort key that puts conversations sharing a prefix next to each other.

    Comparing the message tuples element-wise groups requests that share their leading
    messages (and, within one message, a leading string), which is what prefix caches want.
    """
    return request.messages


@dataclass
class ChatResult:
    """The reply to one :class:`ChatRequest`."""

    text: str
    finish_reason: str  # "stop" | "length" | "error"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    cached: bool = False  # served from the on-disk completion cache

    @property
    def ok(self) -> bool:
        return self.error is None and self.finish_reason != "error"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ChatResult":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def failure(cls, error: str, *, latency_s: float = 0.0, prompt_tokens: int = 0) -> "ChatResult":
        return cls(text="", finish_reason="error", prompt_tokens=prompt_tokens, completion_tokens=0,
                   cached_tokens=0, latency_s=latency_s, error=error)


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
    if expect_thinking or text.lstrip().startswith("<think>"):
        return "", True
    return text, False
