"""The OpenAI-compatible engine against a local threaded HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time

import pytest

from runners import ChatRequest, EngineUnavailable, Sampling, make_engine

from tests.openai_stub import OpenAIStub


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
        s = OpenAIStub(behave=behave)
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


# -- sampling fields, token-limit field, thinking ------------------------------------------

def test_unset_sampling_fields_are_left_to_the_server(server):
    srv = server(lambda body, n, s: (200, ok_payload(body), None))
    eng = _engine(srv)
    eng.generate(_reqs("a", temperature=None, seed=None) + _reqs("b", temperature=0.6, top_p=0.95, top_k=20, min_p=0.0))
    first, second = sorted(srv.requests, key=lambda b: b["messages"][-1]["content"])
    assert set(first) == {"model", "messages", "max_tokens"}
    assert (second["temperature"], second["top_p"], second["top_k"], second["min_p"]) == (0.6, 0.95, 20, 0.0)


def test_http_error_reason_is_short_and_readable(server):
    srv = server(lambda body, n, s: (400, {"object": "error", "message": "top_k must be -1 or >= 1",
                                           "type": "BadRequestError"}, None))
    r = _engine(srv).generate(_reqs("q"))[0]
    assert r.error.startswith("HTTP 400: top_k must be -1 or >= 1 (") and srv.base_url in r.error
    assert r.text == "" and not r.ok


def test_200_with_finish_reason_error_is_an_error(server):
    def behave(body, n, s):
        p = ok_payload(body, text="")
        p["choices"][0]["finish_reason"] = "error"
        return 200, p, None

    r = _engine(server(behave)).generate(_reqs("q"))[0]
    assert r.finish_reason == "error" and "finished with reason 'error'" in r.error


UNSUPPORTED = {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                    "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                         "param": "max_tokens", "code": "unsupported_parameter"}}


def _o_series(body, n, s):
    if "max_tokens" in body:
        return 400, UNSUPPORTED, None
    return 200, ok_payload(body), None


def test_max_tokens_field_switches_once_on_a_400_naming_it(server):
    srv = server(_o_series)
    eng = _engine(srv)
    assert eng.describe()["max_tokens_field"] == "max_tokens"
    out = eng.generate(_reqs("a", "b", "c", max_tokens=7))
    assert all(r.ok for r in out)
    assert eng.describe()["max_tokens_field"] == "max_completion_tokens"
    assert eng.describe()["max_tokens_field_switched"] is True
    n_before = len(srv.requests)
    eng.generate(_reqs("d"))  # remembered: no 400 any more
    assert len(srv.requests) == n_before + 1 and srv.requests[-1]["max_completion_tokens"] == 512
    assert all(b.get("max_completion_tokens") == 7 for b in srv.requests[:n_before] if "max_tokens" not in b)


def test_explicit_max_tokens_field_is_kept(server):
    srv = server(_o_series)
    r = _engine(srv, max_tokens_field="max_tokens").generate(_reqs("a"))[0]
    assert r.finish_reason == "error" and r.error.startswith("HTTP 400: Unsupported parameter: 'max_tokens'")
    ok = _engine(srv, max_tokens_field="max_completion_tokens").generate(_reqs("a"))[0]
    assert ok.ok
    with pytest.raises(ValueError, match="max_tokens_field must be one of"):
        _engine(srv, max_tokens_field="max_new_tokens")


def test_thinking_on_keeps_stops_off_the_server_and_applies_them_after_think(server):
    def behave(body, n, s):
        last = body["messages"][-1]["content"]
        text = {"full": "<think>I see <user> tags</think>\n\nanswer\n<user> invented turn",
                "cut": "<think>still thinking about <user>"}[last]
        p = ok_payload(body, text=text)
        p["choices"][0]["finish_reason"] = "length" if last == "cut" else "stop"
        return 200, p, None

    srv = server(behave)
    eng = _engine(srv, enable_thinking=True, keep_thinking=True)
    full, cut = eng.generate(_reqs("full", "cut", stop=("<user>",)))
    assert all("stop" not in b and b["chat_template_kwargs"] == {"enable_thinking": True} for b in srv.requests)
    assert (full.text, full.finish_reason, full.thinking) == ("answer\n", "stop", "I see <user> tags")
    assert (cut.text, cut.finish_reason, cut.cut_in_thinking) == ("", "length", True)
    off = _engine(srv, enable_thinking=False)
    off.generate(_reqs("full", stop=("<user>",)))
    assert srv.requests[-1]["stop"] == ["<user>"] and srv.requests[-1]["chat_template_kwargs"] == {
        "enable_thinking": False}
    assert _engine(srv).cache_identity() != _engine(srv, enable_thinking=True).cache_identity()


def test_server_side_reasoning_parser(server):
    def behave(body, n, s):
        p = ok_payload(body, text="")
        cut = body["messages"][-1]["content"] == "cut"
        p["choices"][0]["message"] = {"role": "assistant", "content": None if cut else "the answer",
                                      "reasoning_content": "thinking..."}
        p["choices"][0]["finish_reason"] = "length" if cut else "stop"
        return 200, p, None

    ok, cut = _engine(server(behave), enable_thinking=True).generate(_reqs("ok", "cut"))
    assert (ok.text, ok.cut_in_thinking, ok.thinking) == ("the answer", False, None)
    assert (cut.text, cut.finish_reason, cut.cut_in_thinking) == ("", "length", True)


# -- several endpoints ----------------------------------------------------------------------

def _conv(key, turn, affinity=True):
    msgs = [{"role": "system", "content": f"sys {key}"}, {"role": "user", "content": f"{key} first"}]
    for t in range(turn):
        msgs += [{"role": "assistant", "content": f"a{t}"}, {"role": "user", "content": f"{key} turn {t}"}]
    return ChatRequest.from_messages(msgs, Sampling(max_tokens=8), affinity=key if affinity else None)


def test_several_urls_spread_conversations_with_affinity(server):
    srvs = [server(lambda body, n, s: (200, ok_payload(body), None)) for _ in range(4)]
    eng = make_engine("openai:m@" + ",".join(s.base_url for s in srvs), backoff_s=0.01, concurrency=2)
    assert eng.base_urls == [s.base_url for s in srvs] and eng.describe()["base_urls"] == eng.base_urls
    keys = [f"C{i:02d}" for i in range(8)]
    for turn in range(3):  # turn by turn, sessions of each cell (the affinity key)
        out = eng.generate([_conv(k, turn) for k in keys for _ in range(2)])
        assert all(r.ok for r in out)
    where = {}
    for i, s in enumerate(srvs):
        for body in s.requests:
            where.setdefault(body["messages"][0]["content"], set()).add(i)
    assert all(len(v) == 1 for v in where.values())            # a key always goes to one server
    per_server = [len({b["messages"][0]["content"] for b in s.requests}) for s in srvs]
    assert per_server == [2, 2, 2, 2]                           # keys spread evenly
    assert all(len(s.requests) == 12 for s in srvs)


def test_without_affinity_a_conversation_stays_on_its_server(server):
    srvs = [server(lambda body, n, s: (200, ok_payload(body), None)) for _ in range(3)]
    eng = make_engine("openai:m@" + ",".join(s.base_url for s in srvs), backoff_s=0.01)
    for turn in range(3):
        eng.generate([_conv(f"k{i}", turn, affinity=False) for i in range(6)])
    for s in srvs:
        convs = {b["messages"][0]["content"] for b in s.requests}
        assert len(s.requests) == 3 * len(convs) == 6


def test_a_dead_replica_fails_its_own_requests_only(server):
    alive = server(lambda body, n, s: (200, ok_payload(body), None))
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    eng = make_engine(f"openai:m@{alive.base_url},{dead}", base_urls=None, max_retries=1, backoff_s=0.01, timeout_s=5)
    out = eng.generate([_conv(k, 0) for k in ("A", "B", "C", "D")])
    assert [r.ok for r in out] == [True, False, True, False]
    assert all(dead in r.error and "could not reach" in r.error for r in out if not r.ok)
    assert len(alive.requests) == 2  # not moved to the live server


def test_spec_with_several_urls_and_bad_ones():
    eng = make_engine("openai:m@http://a:1/v1,http://b:2/v1/", base_urls=["http://c:3/v1"])
    assert eng.base_urls == ["http://a:1/v1", "http://b:2/v1", "http://c:3/v1"] and eng.url == "http://a:1/v1/chat/completions"
    with pytest.raises(ValueError, match="'ftp://b/v1' is not an http"):
        make_engine("openai:m@http://a:1/v1,ftp://b/v1")
