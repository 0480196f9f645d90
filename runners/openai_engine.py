"""Engine for any OpenAI-compatible chat-completions server (vllm serve, llama.cpp server, hosted APIs).

Requests of a batch run concurrently on an asyncio httpx client, at most ``concurrency``
at a time per server.  Transient failures (connection errors, timeouts, 408/409/425/429/5xx)
are retried with exponential backoff and jitter (honouring ``Retry-After``); other client
errors (400, 401, 403, 404, 422...) are not.  A 400 that says the prompt exceeds the model's
context becomes a ``length`` result.  Every other failure is an ``error`` result whose
``error`` starts with a short reason, ``"HTTP 400: <the server's message> (<url>)"``, never a
scored reply.  If no request of a batch could reach any server, :class:`EngineUnavailable`
is raised with the URL.

Several servers: ``openai:<model>@<url1>,<url2>`` (or ``base_urls=[...]``) spreads
conversations over the replicas by :func:`runners.affinity.affinity_key` (the request's
``affinity``, else its first messages), sticky, so each server's prefix cache stays warm.
A replica that is down is not skipped: its conversations fail with error results (after
retries), the others go on.

Sampling: ``temperature``, ``top_p``, ``seed`` and the token limit are sent when set;
``top_k`` and ``min_p`` only when set (vLLM and llama.cpp servers accept them, hosted OpenAI
refuses them).  ``seed`` is per request; whether distinct seeds give independent samples is
up to the server (vLLM: yes).  The token limit goes as ``max_tokens`` or
``max_completion_tokens`` (``max_tokens_field``).  With the default ``"auto"`` it starts as
``max_tokens``, and a 400 saying ``max_tokens`` is unsupported (o-series and some hosted
models) switches to ``max_completion_tokens`` once, for the rest of the engine's life; the
request is sent again at once.  ``describe()`` records the field in use.

Thinking: ``enable_thinking`` (None = the server's default) is sent as
``chat_template_kwargs`` (vLLM, SGLang).  While it is True the stop strings are not sent
(they would fire inside the thinking) and are applied to the visible answer instead; a reply
cut inside the thinking is ``cut_in_thinking``.  A server-side reasoning parser's
``reasoning_content`` is read as the thinking.
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

from .affinity import StickyAssigner
from .engine import EngineUnavailable
from .thinking import split_reply
from .types import ChatRequest, ChatResult

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_TOKENS_FIELDS = ("auto", "max_tokens", "max_completion_tokens")
_CONTEXT_PATTERNS = re.compile(
    r"context[ _-]?length|maximum context|context window|context size|exceeds? the (?:available )?context"
    r"|too many tokens|prompt is too long|maximum model length|max_model_len|context_length_exceeded",
    re.IGNORECASE)
_MAX_TOKENS_UNSUPPORTED = re.compile(
    r"max_tokens'?\W.{0,80}(?:not supported|unsupported|max_completion_tokens)"
    r"|unsupported (?:parameter|argument).{0,20}max_tokens", re.IGNORECASE | re.DOTALL)


def parse_openai_spec(arg: str) -> tuple[str, list[str]]:
    """``"<model>@<base_url>[,<base_url>...]"`` -> (model, [base_url, ...])."""
    m = re.search(r"@(?=https?://)", arg)
    if not m:
        raise ValueError(f"openai engine spec must be 'openai:<model>@<base_url>[,<base_url>...]' "
                         f"(e.g. openai:Qwen/Qwen3-8B@http://127.0.0.1:8000/v1), got 'openai:{arg}'")
    model, rest = arg[:m.start()], arg[m.end():]
    if not model:
        raise ValueError(f"openai engine spec has no model before '@': 'openai:{arg}'")
    urls = [u.strip() for u in rest.split(",")]
    bad = [u for u in urls if not re.match(r"https?://[^\s,]+$", u)]
    if bad:
        raise ValueError(f"openai engine spec: {bad[0]!r} is not an http(s) URL in 'openai:{arg}'")
    return model, urls


def server_message(text: str) -> str:
    """The human-readable part of an error body (OpenAI, vLLM, llama.cpp and FastAPI shapes)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return " ".join(text.split())[:300]
    for path in (("error", "message"), ("error",), ("message",), ("detail",)):
        cur: Any = data
        for k in path:
            cur = cur.get(k) if isinstance(cur, Mapping) else None
        if isinstance(cur, str) and cur.strip():
            return " ".join(cur.split())[:300]
    return " ".join(text.split())[:300]


class OpenAIEngine:
    name = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | Sequence[str] | None = None,
        *,
        base_urls: Sequence[str] | None = None,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        concurrency: int = 16,
        max_retries: int = 5,
        timeout_s: float = 600.0,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_tokens_field: str = "auto",
        enable_thinking: bool | None = None,
        strip_thinking: bool = True,
        keep_thinking: bool = False,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        urls += list(base_urls or [])
        if not urls:
            raise ValueError("the openai engine needs a base URL: 'openai:<model>@<base_url>' or base_urls=[...]")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if max_tokens_field not in MAX_TOKENS_FIELDS:
            raise ValueError(f"max_tokens_field must be one of {MAX_TOKENS_FIELDS}, got {max_tokens_field!r}")
        if enable_thinking is not None and not isinstance(enable_thinking, bool):
            raise ValueError(f"enable_thinking must be true, false or None, got {enable_thinking!r}")
        self.model = model
        self.base_urls = [u.rstrip("/") for u in urls]
        self.base_url = self.base_urls[0]
        self.urls = [f"{u}/chat/completions" for u in self.base_urls]
        self.url = self.urls[0]
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
        self._auto_field = max_tokens_field == "auto"
        self.max_tokens_field = "max_tokens" if self._auto_field else max_tokens_field
        self.max_tokens_field_switched = False
        self.enable_thinking = enable_thinking
        self.strip_thinking = strip_thinking
        self.keep_thinking = keep_thinking
        self.extra_body = dict(extra_body or {})
        self.assigner = StickyAssigner(len(self.urls))

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "model": self.model, "base_url": self.base_url, "base_urls": list(self.base_urls),
                "concurrency_per_server": self.concurrency, "max_retries": self.max_retries,
                "timeout_s": self.timeout_s, "max_tokens_field": self.max_tokens_field,
                "max_tokens_field_switched": self.max_tokens_field_switched,
                "enable_thinking": self.enable_thinking, "stops_sent_to_server": self.enable_thinking is not True,
                "strip_thinking": self.strip_thinking, "extra_body": dict(self.extra_body),
                "replica_keys": list(self.assigner.keys_per_replica)}

    def cache_identity(self) -> dict[str, Any]:
        return {"extra_body": self.extra_body, "strip_thinking": self.strip_thinking,
                "enable_thinking": self.enable_thinking}

    # -- one request ---------------------------------------------------------------------
    def _payload(self, request: ChatRequest) -> dict[str, Any]:
        s = request.sampling
        body: dict[str, Any] = {"model": self.model, "messages": request.message_dicts(),
                                self.max_tokens_field: s.max_tokens, **s.overrides()}
        if s.stop and self.enable_thinking is not True:
            body["stop"] = list(s.stop)
        body.update(self.extra_body)
        if self.enable_thinking is not None:
            body["chat_template_kwargs"] = {**dict(body.get("chat_template_kwargs") or {}),
                                            "enable_thinking": self.enable_thinking}
        return body

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after:
            try:
                return min(float(retry_after), self.max_backoff_s * 2)
            except ValueError:
                pass
        base = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        return base * (0.5 + random.random() / 2)

    def _result(self, data: Any, request: ChatRequest, url: str, latency: float) -> ChatResult:
        try:
            choice = data["choices"][0]
            msg = choice.get("message") or {}
            content = msg.get("content") or ""
            reasoning = msg.get("reasoning_content") or msg.get("reasoning") or ""
            reason = choice.get("finish_reason")
        except (KeyError, IndexError, TypeError, AttributeError):
            return ChatResult.failure(f"malformed response: {str(data)[:300]} ({url})", latency_s=latency)
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        if reason in ("error", "abort"):
            return ChatResult.failure(f"server finished with reason {reason!r} ({url})", latency_s=latency,
                                      prompt_tokens=prompt_tokens)
        finish = "length" if reason == "length" else "stop"
        parsed_by_server = bool(reasoning)
        rep = split_reply(content, finish, stop=request.sampling.stop, strip=self.strip_thinking,
                          stop_after_fence=request.sampling.stop_after_fence,
                          expect_thinking=self.enable_thinking is True and not parsed_by_server)
        cut = rep.cut_in_thinking or (parsed_by_server and finish == "length" and not content.strip())
        thinking = "\n".join(t for t in (reasoning, rep.thinking) if t)
        return ChatResult(
            text="" if cut else rep.text, finish_reason=rep.finish_reason,
            prompt_tokens=prompt_tokens, completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
            latency_s=latency, cut_in_thinking=cut, thinking=(thinking if self.keep_thinking and thinking else None))

    def _switch_max_tokens_field(self, body: Mapping[str, Any], text: str) -> bool:
        """After a 400 naming ``max_tokens`` as unsupported: use max_completion_tokens from now on."""
        if not self._auto_field or "max_tokens" not in body or not _MAX_TOKENS_UNSUPPORTED.search(text):
            return False
        if self.max_tokens_field == "max_tokens":  # a concurrent request may have switched already
            self.max_tokens_field = "max_completion_tokens"
            self.max_tokens_field_switched = True
        return True

    async def _one(self, client: Any, sem: asyncio.Semaphore, url: str,
                   request: ChatRequest) -> tuple[ChatResult, bool]:
        """Returns (result, reached_server)."""
        import httpx

        t0 = time.perf_counter()
        last = ""
        reached = False
        attempt = 0
        switched_here = False
        while attempt <= self.max_retries:
            body = self._payload(request)
            retry_after = None
            async with sem:
                try:
                    resp = await client.post(url, json=body, headers=self._headers)
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
                        return ChatResult.failure(f"non-JSON response: {resp.text[:300]} ({url})",
                                                  latency_s=time.perf_counter() - t0), True
                    return self._result(data, request, url, time.perf_counter() - t0), True
                text = resp.text
                if status == 400 and _CONTEXT_PATTERNS.search(text):
                    return ChatResult(text="", finish_reason="length", latency_s=time.perf_counter() - t0), True
                if status == 400 and not switched_here and self._switch_max_tokens_field(body, text):
                    switched_here = True
                    continue  # the same attempt again, with max_completion_tokens
                last = f"HTTP {status}: {server_message(text)}"
                if status not in RETRY_STATUS:
                    return ChatResult.failure(f"{last} ({url})", latency_s=time.perf_counter() - t0), True
                retry_after = resp.headers.get("retry-after")
            if attempt < self.max_retries:
                await asyncio.sleep(self._delay(attempt, retry_after))
            attempt += 1
        what = "failed" if reached else "could not reach"
        return ChatResult.failure(f"{last} ({what} {url} after {self.max_retries + 1} attempts)",
                                  latency_s=time.perf_counter() - t0), reached

    async def _run(self, requests: Sequence[ChatRequest]) -> list[tuple[ChatResult, bool]]:
        import httpx

        where = self.assigner.assign(list(requests))
        sems = [asyncio.Semaphore(self.concurrency) for _ in self.urls]
        n = self.concurrency * len(self.urls)
        limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits) as client:
            return await asyncio.gather(*(self._one(client, sems[r], self.urls[r], req)
                                          for req, r in zip(requests, where)))

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
            raise EngineUnavailable(out[0][0].error or f"could not reach {', '.join(self.urls)}")
        return [res for res, _ in out]

    def close(self) -> None:
        pass
