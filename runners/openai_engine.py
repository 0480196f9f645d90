"""Engine for any OpenAI-compatible chat-completions server (vllm serve, llama.cpp server, hosted APIs).

Requests of a batch run concurrently on an asyncio httpx client, at most ``concurrency``
at a time.  Transient failures (connection errors, timeouts, 408/409/425/429/5xx) are
retried with exponential backoff and jitter (honouring ``Retry-After``); other client
errors (400, 401, 403, 404, 422...) are not.  A 400 that says the prompt exceeds the
model's context becomes a ``length`` result.  If no request of a batch could reach the
server, :class:`EngineUnavailable` is raised with the URL; otherwise each failed request
is an ``error`` result naming the URL and status.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import threading
import time
from typing import Any, Mapping, Sequence

from .engine import EngineUnavailable
from .types import ChatRequest, ChatResult, strip_thinking

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_CONTEXT_PATTERNS = re.compile(
    r"context[ _-]?length|maximum context|context window|context size|exceeds? the (?:available )?context"
    r"|too many tokens|prompt is too long|maximum model length|max_model_len|context_length_exceeded",
    re.IGNORECASE)


def parse_openai_spec(arg: str) -> tuple[str, str]:
    """``"<model>@<base_url>"`` -> (model, base_url)."""
    m = re.search(r"@(?=https?://)", arg)
    if not m:
        raise ValueError(f"openai engine spec must be 'openai:<model>@<base_url>' "
                         f"(e.g. openai:Qwen/Qwen3-8B@http://127.0.0.1:8000/v1), got 'openai:{arg}'")
    model, base_url = arg[:m.start()], arg[m.end():]
    if not model:
        raise ValueError(f"openai engine spec has no model before '@': 'openai:{arg}'")
    return model, base_url


class OpenAIEngine:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        concurrency: int = 16,
        max_retries: int = 5,
        timeout_s: float = 600.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        strip_thinking: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._headers.update(dict(headers or {}))
        self.concurrency = int(concurrency)
        self.max_retries = int(max_retries)
        self.timeout_s = float(timeout_s)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.strip_thinking = strip_thinking
        self.extra_body = dict(extra_body or {})

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.model, "base_url": self.base_url,
                "concurrency": self.concurrency, "max_retries": self.max_retries, "timeout_s": self.timeout_s,
                "strip_thinking": self.strip_thinking, "extra_body": dict(self.extra_body)}

    def cache_identity(self) -> dict[str, Any]:
        return {"extra_body": self.extra_body, "strip_thinking": self.strip_thinking}

    # -- one request ---------------------------------------------------------------------
    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {"model": self.model, "messages": request.message_dicts(),
                                "temperature": s.temperature, "top_p": s.top_p, "max_tokens": s.max_tokens}
        if s.seed is not None:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = list(s.stop)
        body.update(self.extra_body)
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s * 2)
            except ValueError:
                pass
        base = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        return base * (0.5 + random.random() / 2)

    def _result(self, data: Any, latency: float) -> ChatResult:
        try:
            choice = data["choices"][0]
            msg = choice.get("message") or {}
            text = msg.get("content") or ""
            reason = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            return ChatResult.failure(f"malformed response from {self.url}: {str(data)[:300]}", latency_s=latency)
        usage = data.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        if self.strip_thinking:
            text, _ = strip_thinking(text)
        return ChatResult(
            text=text,
            finish_reason="length" if reason == "length" else "stop",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
            latency_s=latency,
        )

    async def _one(self, client: Any, sem: asyncio.Semaphore, request: ChatRequest) -> tuple[ChatResult, bool]:
        """Returns (result, reached_server)."""
        import httpx

        body = self._payload(request)
        t0 = time.perf_counter()
        last = ""
        reached = False
        for attempt in range(self.max_retries + 1):
            retry_after = None
            async with sem:
                try:
                    resp = await client.post(self.url, json=body, headers=self._headers)
                except httpx.TransportError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                    resp = None
            if resp is not None:
                reached = True
                status = resp.status_code
                if status == 200:
                    try:
                        data = resp.json()
                    except (json.JSONDecodeError, ValueError):
                        return ChatResult.failure(f"non-JSON response from {self.url}: {resp.text[:300]}",
                                                  latency_s=time.perf_counter() - t0), True
                    return self._result(data, time.perf_counter() - t0), True
                text = resp.text
                if status == 400 and _CONTEXT_PATTERNS.search(text):
                    return ChatResult(text="", finish_reason="length", latency_s=time.perf_counter() - t0), True
                last = f"HTTP {status}: {text[:500]}"
                if status not in RETRY_STATUS:
                    return ChatResult.failure(f"{self.url} answered {last}",
                                              latency_s=time.perf_counter() - t0), True
                retry_after = resp.headers.get("retry-after")
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
        what = "failed" if reached else "could not reach"
        return ChatResult.failure(f"{what} {self.url} after {self.max_retries + 1} attempts: {last}",
                                  latency_s=time.perf_counter() - t0), reached

    async def _run(self, requests: Sequence[ChatRequest]) -> list[tuple[ChatResult, bool]]:
        import httpx

        sem = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits) as client:
            return await asyncio.gather(*(self._one(client, sem, r) for r in requests))

    def generate(self, requests: Sequence[ChatRequest]) -> list[ChatResult]:
        if not requests:
            return []
        try:
            asyncio.get_running_loop()
            in_loop = True
        except RuntimeError:
            in_loop = False
        if not in_loop:
            out = asyncio.run(self._run(requests))
        else:  # called from async code: run on a private loop in a helper thread
            box: dict[str, Any] = {}

            def target() -> None:
                try:
                    box["out"] = asyncio.run(self._run(requests))
                except BaseException as exc:  # pragma: no cover - re-raised below
                    box["exc"] = exc

            th = threading.Thread(target=target, name="openai-engine")
            th.start()
            th.join()
            if "exc" in box:
                raise box["exc"]
            out = box["out"]
        if not any(reached for _, reached in out):
            raise EngineUnavailable(out[0][0].error or f"could not reach {self.url}")
        return [res for res, _ in out]

    def close(self) -> None:
        pass
