"""The OpenAI-compatible engine against a local threaded HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runners import ChatRequest, EngineUnavailable, Sampling, make_engine


class FakeServer:
    """Answers /v1/chat/completions with whatever ``behave(body, n)`` returns: (status, payload)."""

    def __init__(self, behave):
        self.behave = behave
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.lock = threading.Lock()
        self.inflight = 0
        self.max_inflight = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                with outer.lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    count = len(outer.requests)
                    outer.inflight += 1
                    outer.max_inflight = max(outer.max_inflight, outer.inflight)
                try:
                    status, payload, headers = outer.behave(body, count, outer)
                finally:
                    with outer.lock:
                        outer.inflight -= 1
                data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def ok_payload(body, text=None, cached=0):
    last = body["messages"][-1]["content"]
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text or f"re: {last}"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14,
                      "prompt_tokens_details": {"cached_tokens": cached}}}


@pytest.fixture
def server():
    servers = []

    def start(behave):
        s = FakeServer(behave)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def _reqs(*qs, **sampling):
    return [ChatRequest.from_messages([{"role": "user", "content": q}], Sampling(**sampling)) for q in qs]


def _engine(srv, **kw):
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("api_key", "sk-test")
    return make_engine(f"openai:test-model@{srv.base_url}", **kw)


def test_success_and_payload(server):
    srv = server(lambda body, n, s: (200, ok_payload(body, cached=5), None))
    eng = _engine(srv)
    out = eng.generate(_reqs("a", "b", max_tokens=9, stop=("END",), seed=4))
    assert [r.text for r in out] == ["re: a", "re: b"]
    r = out[0]
    assert (r.finish_reason, r.prompt_tokens, r.completion_tokens, r.cached_tokens) == ("stop", 11, 3, 5)
    body = srv.requests[0]
    assert body["model"] == "test-model" and body["max_tokens"] == 9 and body["stop"] == ["END"]
    assert body["temperature"] == 0.0 and body["seed"] == 4
    assert srv.headers[0]["Authorization"] == "Bearer sk-test"


def test_length_finish_and_thinking_stripped(server):
    def behave(body, n, s):
        p = ok_payload(body, text="<think>hmm</think>\n\nfinal")
        p["choices"][0]["finish_reason"] = "length"
        return 200, p, None

    srv = server(behave)
    r = _engine(srv).generate(_reqs("q"))[0]
    assert (r.text, r.finish_reason) == ("final", "length")


def test_retry_on_503_then_success(server):
    def behave(body, n, s):
        if n <= 2:
            return 503, {"error": "warming up"}, None
        return 200, ok_payload(body), None

    srv = server(behave)
    r = _engine(srv).generate(_reqs("q"))[0]
    assert r.ok and r.text == "re: q"
    assert len(srv.requests) == 3


def test_retry_on_429_honours_retry_after(server):
    def behave(body, n, s):
        if n == 1:
            return 429, {"error": "slow down"}, {"Retry-After": "0"}
        return 200, ok_payload(body), None

    srv = server(behave)
    assert _engine(srv).generate(_reqs("q"))[0].ok
    assert len(srv.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404])
def test_no_retry_on_client_errors(server, status):
    srv = server(lambda body, n, s: (status, {"error": {"message": "bad request: unknown field"}}, None))
    r = _engine(srv).generate(_reqs("q"))[0]
    assert r.finish_reason == "error" and f"HTTP {status}" in r.error and srv.base_url in r.error
    assert len(srv.requests) == 1


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens",
    "the request exceeds the available context size, try increasing it",
    "Input prompt (9000 tokens) is too long and exceeds limit of 8192 (max_model_len)",
])
def test_context_length_400_becomes_length(server, message):
    srv = server(lambda body, n, s: (400, {"error": {"message": message, "type": "BadRequestError"}}, None))
    r = _engine(srv).generate(_reqs("q"))[0]
    assert r.finish_reason == "length" and r.text == "" and r.error is None
    assert len(srv.requests) == 1


def test_retries_exhausted_is_an_error_naming_the_url(server):
    srv = server(lambda body, n, s: (500, {"error": "boom"}, None))
    r = _engine(srv, max_retries=2).generate(_reqs("q"))[0]
    assert r.finish_reason == "error" and "after 3 attempts" in r.error and srv.base_url in r.error
    assert len(srv.requests) == 3


def test_one_bad_request_does_not_sink_the_batch(server):
    def behave(body, n, s):
        if body["messages"][-1]["content"] == "bad":
            return 422, {"error": "unprocessable"}, None
        return 200, ok_payload(body), None

    srv = server(behave)
    out = _engine(srv).generate(_reqs("a", "bad", "c"))
    assert [r.finish_reason for r in out] == ["stop", "error", "stop"]


def test_concurrency_limit_is_respected(server):
    limit = 3

    def behave(body, n, s):
        # hold each request until `limit` are in flight (or a short deadline), so the
        # maximum is reached whenever the client allows it
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            with s.lock:
                if s.inflight >= limit:
                    break
            time.sleep(0.005)
        return 200, ok_payload(body), None

    srv = server(behave)
    out = _engine(srv, concurrency=limit).generate(_reqs(*[f"q{i}" for i in range(10)]))
    assert [r.text for r in out] == [f"re: q{i}" for i in range(10)]
    assert srv.max_inflight == limit


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_endpoint_is_a_clear_error():
    url = f"http://127.0.0.1:{_free_port()}/v1"
    eng = make_engine(f"openai:m@{url}", max_retries=1, backoff_s=0.01, timeout_s=5)
    with pytest.raises(EngineUnavailable, match=f"could not reach {url}/chat/completions after 2 attempts"):
        eng.generate(_reqs("a", "b"))


def test_spec_parsing_and_bad_specs(monkeypatch):
    monkeypatch.setenv("MY_KEY", "k")
    eng = make_engine("openai:org/model-1@https://api.example.invalid/v1/", api_key_env="MY_KEY")
    assert eng.model == "org/model-1" and eng.url == "https://api.example.invalid/v1/chat/completions"
    assert eng._headers["Authorization"] == "Bearer k"
    with pytest.raises(ValueError, match="openai:<model>@<base_url>"):
        make_engine("openai:model-without-url")
    with pytest.raises(ValueError, match="no model"):
        make_engine("openai:@http://127.0.0.1:1/v1")


def test_generate_inside_a_running_event_loop(server):
    import asyncio

    srv = server(lambda body, n, s: (200, ok_payload(body), None))
    eng = _engine(srv)

    async def main():
        return eng.generate(_reqs("loop"))

    assert asyncio.run(main())[0].text == "re: loop"
