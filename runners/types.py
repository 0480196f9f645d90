"""Plain data types shared by every engine: sampling settings, requests, results.

A conversation is a sequence of ``{"role": ..., "content": ...}`` messages.  Inside a
:class:`ChatRequest` it is stored as a tuple of ``(role, content)`` pairs so that requests
are hashable and immutable; :meth:`ChatRequest.from_messages` builds one from the usual
``list[dict]`` form and :meth:`ChatRequest.message_dicts` turns it back.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable, Mapping, Sequence

from .thinking import strip_thinking  # noqa: F401  (re-exported: runners.types.strip_thinking)

Message = Mapping[str, str]

FINISH_REASONS = ("stop", "length", "error")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class Sampling:
    """Decoding settings for one request.  Greedy by default.

    ``None`` means *not set*: the engine leaves that field to the model's
    ``generation_config.json`` (vLLM) or the server's default (OpenAI-compatible) instead
    of overriding it.  ``top_k=0`` disables top-k.  ``seed`` is per request: distinct seeds
    give independent samples where the backend supports it (see each engine's doc), and the
    seed is part of the completion-cache key.
    """

    temperature: float | None = 0.0
    top_p: float | None = None
    max_tokens: int = 512
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    top_k: int | None = None
    min_p: float | None = None
    # end the reply right after its first fenced ``` block whose body contains this string (e.g.
    # "def "): what follows a finished code block is not generated (llama.cpp stops there) or
    # is cut (every other engine), so all engines return the same text
    stop_after_fence: str | None = None

    def __post_init__(self) -> None:
        stop = self.stop
        if isinstance(stop, str):
            stop = (stop,)
        stop = tuple(stop)
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"Sampling.stop must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)
        t, p, k, m = self.temperature, self.top_p, self.top_k, self.min_p
        if t is not None and not (_is_num(t) and t >= 0):
            raise ValueError(f"Sampling.temperature must be a finite number >= 0 or None, got {t!r}")
        if p is not None and not (_is_num(p) and 0 < p <= 1):
            raise ValueError(f"Sampling.top_p must be in (0, 1] or None, got {p!r}")
        if k is not None and not (_is_int(k) and k >= 0):
            raise ValueError(f"Sampling.top_k must be an int >= 0 (0 = off) or None, got {k!r}")
        if m is not None and not (_is_num(m) and 0 <= m <= 1):
            raise ValueError(f"Sampling.min_p must be in [0, 1] or None, got {m!r}")
        if not (_is_int(self.max_tokens) and self.max_tokens >= 1):
            raise ValueError(f"Sampling.max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if self.seed is not None and not _is_int(self.seed):
            raise ValueError(f"Sampling.seed must be an int or None, got {self.seed!r}")
        if self.stop_after_fence is not None and not (isinstance(self.stop_after_fence, str) and self.stop_after_fence):
            raise ValueError(f"Sampling.stop_after_fence must be a non-empty string or None, got {self.stop_after_fence!r}")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["stop"] = list(self.stop)
        if d["stop_after_fence"] is None:   # unset: the keys of caches made before the field stay valid
            del d["stop_after_fence"]
        return d

    def overrides(self) -> dict[str, Any]:
        """The decoding fields that are set (not None), as SamplingParams-style keys."""
        keys = ("temperature", "top_p", "top_k", "min_p", "seed")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sampling":
        known = {f.name for f in fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown Sampling field(s): {sorted(unknown)}; known: {sorted(known)}")
        return cls(**{k: (tuple(v) if k == "stop" else v) for k, v in d.items()})


def derive_seed(*parts: Any) -> int:
    """A stable seed in [0, 2**31) from any parts, e.g. ``derive_seed(run_seed, session, trial, turn)``.

    Same parts, same seed, on every machine and Python version; it fits every backend's
    seed type (llama.cpp takes 32 bits).
    """
    blob = "\x1f".join(repr(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big") % (2 ** 31)


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
    # which conversations belong together (e.g. a benchmark cell): engines with several
    # replicas send equal keys to the same replica so its prefix cache stays warm.  Not part
    # of equality, hashing or the completion-cache key: it never changes a reply.
    affinity: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", _normalize_messages(self.messages))
        if not isinstance(self.sampling, Sampling):
            raise ValueError(f"ChatRequest.sampling must be a Sampling, got {type(self.sampling).__name__}")
        if self.affinity is not None and not isinstance(self.affinity, str):
            raise ValueError(f"ChatRequest.affinity must be a string or None, got {type(self.affinity).__name__}")

    @classmethod
    def from_messages(cls, messages: Sequence[Message], sampling: Sampling | None = None,
                      affinity: str | None = None) -> "ChatRequest":
        return cls(messages=_normalize_messages(messages), sampling=sampling or Sampling(), affinity=affinity)

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
    cut_in_thinking: bool = False  # the reply ended inside <think> (text is "", finish "length")
    thinking: str | None = None    # the thinking text, only when the engine keeps it (diagnostics)

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
