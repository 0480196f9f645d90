"""A deterministic engine for tests and benchmarks.

Replies come from a function ``fn(messages: list[dict]) -> str``, from
``request_fn(request: ChatRequest)`` (which sees the sampling, seed included: the scripted
engine itself ignores the seed and every decoding field), or from a table keyed by the last
user message or by the whole conversation (``messages_json`` of it).  A reply that is a
:class:`ChatResult` is returned as it is (to script errors or cut-off replies).  Tokens are
counted approximately (whitespace split) so that accounting works.  ``max_tokens`` and
``stop`` are honoured the same way a real engine would.  Optional per-token work makes the
engine cost something, for benchmarks.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Mapping, Sequence

from .thinking import cut_after_fence, cut_at_stop
from .types import ChatRequest, ChatResult, messages_json


def count_tokens(text: str) -> int:
    return len(text.split())


class ScriptedEngine:
    name = "scripted"

    def __init__(
        self,
        fn: Callable[[list[dict[str, str]]], Any] | None = None,
        table: Mapping[str, str] | None = None,
        *,
        request_fn: Callable[[ChatRequest], Any] | None = None,
        model: str = "scripted",
        default: str | None = None,
        per_token_s: float = 0.0,
        per_token_work: int = 0,
        per_batch_s: float = 0.0,
    ) -> None:
        if fn is None and table is None and default is None and request_fn is None:
            raise ValueError("scripted engine needs fn=..., request_fn=... or table=... (or default=...)")
        self.fn = fn
        self.request_fn = request_fn
        self.table = dict(table or {})
        self.model = model
        self.default = default
        self.per_token_s = float(per_token_s)
        self.per_token_work = int(per_token_work)
        self.per_batch_s = float(per_batch_s)
        self.generate_calls = 0          # number of generate() invocations
        self.requests_served = 0         # number of requests across them
        self.batch_sizes: list[int] = []
        self.seen: list[ChatRequest] = []

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.model, "per_token_s": self.per_token_s,
                "per_token_work": self.per_token_work}

    def cache_identity(self) -> dict[str, Any]:
        return {}

    def _reply(self, request: ChatRequest) -> Any:
        if self.request_fn is not None:
            return self.request_fn(request)
        msgs = request.message_dicts()
        if self.fn is not None:
            return self.fn(msgs)
        full = messages_json(request.messages)
        if full in self.table:
            return self.table[full]
        last = request.last_user_message
        if last is not None and last in self.table:
            return self.table[last]
        if self.default is not None:
            return self.default
        raise KeyError(f"no scripted reply for last user message {last!r}")

    def _burn(self, n_tokens: int) -> None:
        if self.per_token_work > 0 and n_tokens > 0:
            h = b"x"
            for _ in range(n_tokens * self.per_token_work):
                h = hashlib.blake2b(h, digest_size=16).digest()

    def _one(self, request: ChatRequest) -> ChatResult:
        t0 = time.perf_counter()
        prompt_tokens = sum(count_tokens(c) + 1 for _, c in request.messages)
        try:
            reply = self._reply(request)
        except Exception as exc:  # one bad request never aborts the batch
            return ChatResult.failure(f"{type(exc).__name__}: {exc}", prompt_tokens=prompt_tokens,
                                      latency_s=time.perf_counter() - t0)
        if isinstance(reply, ChatResult):
            return reply
        text, _ = cut_at_stop(str(reply), request.sampling.stop)
        text = cut_after_fence(text, request.sampling.stop_after_fence) or text
        finish = "stop"
        words = text.split()
        if len(words) > request.sampling.max_tokens:
            text = " ".join(words[: request.sampling.max_tokens])
            finish = "length"
        n = count_tokens(text)
        self._burn(n)
        return ChatResult(text=text, finish_reason=finish, prompt_tokens=prompt_tokens, completion_tokens=n,
                          cached_tokens=0, latency_s=time.perf_counter() - t0)

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        self.generate_calls += 1
        self.requests_served += len(requests)
        self.batch_sizes.append(len(requests))
        self.seen.extend(requests)
        t0 = time.perf_counter()
        results = [self._one(r) for r in requests]
        if self.per_token_s > 0 or self.per_batch_s > 0:
            n = sum(r.completion_tokens for r in results)
            time.sleep(self.per_batch_s + self.per_token_s * n)
        dt = time.perf_counter() - t0
        for r in results:  # a batched engine reports the batch's wall time for each request
            r.latency_s = dt
        return results

    def close(self) -> None:
        pass
