"""The mem0 condition end to end against the real mem0ai library, its LLM a scripted
OpenAI-compatible server on 127.0.0.1 that returns fixed extraction JSON; the digest cache;
the errors when the memory LLM is unreachable or the extra is missing."""

from __future__ import annotations

import json

import pytest

from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import ConditionEnv, get_condition
from capa_hf.evaluation.conditions.memory_base import memory_counts
from capa_hf.schema.record import SessionRecord
from capa_hf.memory.mem0_store import classify_extraction
from tests.openai_stub import OpenAIStub, last_user, system_text

FACTS = {0: ["The user wants digits returned as a string", "The user counts a value on the limit as inside"],
         1: ["The user wants the largest prime factor"], 4: ["The user wants the sum of the even digits"]}


def _history(capa_data):
    return capa_data.cell_history("C01")


def _reply_for(capa_data):
    hist = _history(capa_data)

    def reply(body):
        assert body["response_format"] == {"type": "json_object"}
        prompt = last_user(body) + system_text(body)
        for i, s in reversed(list(enumerate(hist))):    # later prompts also quote earlier messages
            if s.turns[0].content[:200] in prompt and s.turns[-1].content[:200] in prompt:
                if i == 2:
                    return "Sorry, I cannot help with that."          # an extraction failure
                if i == 3:
                    return '{"memory": []}'                            # an empty extraction
                return json.dumps({"memory": [{"text": t} for t in FACTS[i]]})
        raise AssertionError("the extraction prompt holds no history session")

    return reply


@pytest.mark.parametrize("raw, status", [('{"memory": [{"text": "a"}]}', "ok"), ('```json\n{"memory": [{"text": "a"}]}\n```', "ok"),
                                         ('{"memory": []}', "empty"), ('{"facts": ["a"]}', "failed"),
                                         ("no", "failed"), (None, "failed")])
def test_classify_extraction(raw, status):
    assert classify_extraction(raw) == status


def test_mem0_end_to_end_with_the_real_library(capa_data, tmp_path):
    targets = sorted((s for s in capa_data.heldout.values() if s.cell_id == "C01"), key=lambda s: s.position)
    hist = _history(capa_data)
    with OpenAIStub(_reply_for(capa_data)) as srv:
        env = ConditionEnv(out=tmp_path, options={"memory_llm": srv.spec})
        ctx = get_condition("mem0").contexts(targets, capa_data, env)
        assert len(srv.requests) == 5                               # one extraction call per history session
        assert all(r["model"] == "stub-model" for r in srv.requests)
        c = ctx[targets[0].session_id]
        digest = json.loads((tmp_path / "memory" / "mem0" / "C01.json").read_text())
        stored = [m["text"] for m in digest["memories"]]
        assert stored == FACTS[0] + FACTS[1] + FACTS[4]                   # in the order mem0 created them
        hit = {i for ids in digest["hits"].values() for i in ids}
        shown = [m for m in digest["memories"] if m["id"] in hit]
        assert shown and set(digest["hits"]) == {t.session_id for t in targets}
        assert c["text"].count("\n- ") == len(shown) and all(f"- {m['text']}" in c["text"] for m in shown)
        positions = [c["text"].index(m["text"]) for m in shown]
        assert positions == sorted(positions)
        assert all(ctx[t.session_id]["text"] == c["text"] for t in targets)   # one rendering per cell
        assert c["sources"] == sorted({m["source"] for m in shown})
        assert c["memory"]["shown"] == len(shown)
        assert c["memory"]["cell_counts"] == {"extraction_calls": 5, "extraction_failures": 1, "empty_extractions": 1,
                                              "calls_adding_nothing": 2, "memories": 4}
        assert [m["source"] for m in digest["memories"]] == [hist[0].session_id] * 2 + [hist[1].session_id, hist[4].session_id]
        assert digest["calls"][2]["status"] == "failed" and digest["calls"][2]["raw"].startswith("Sorry")
        assert digest["llm"]["model"] == "stub-model" and not digest["llm"]["served_by_capa"]
        stats = memory_counts([SessionRecord.from_dict({"session_id": targets[0].session_id, "cell_id": "C01",
                                                        "context_chars": len(c["text"]), **c})])["memory"]
        assert stats["extraction_failures"] == 1 and stats["empty_extractions"] == 1 and stats["empty_cells"] == 0
        # the digest is cached: a rerun asks the memory LLM nothing
        again = get_condition("mem0").contexts(targets[:2], capa_data, env)
        assert len(srv.requests) == 5 and again[targets[0].session_id]["text"] == c["text"]
    import mem0.memory.telemetry

    assert mem0.memory.telemetry.MEM0_TELEMETRY is False
    assert not (tmp_path / "qdrant-unused").exists()                 # qdrant stayed in memory


def test_a_changed_history_rebuilds_the_digest(capa_data, tmp_path):
    from capa_hf.memory.digest import DigestCache, fingerprint

    hist = _history(capa_data)
    a = fingerprint("mem0", "C01", hist, [], {"memory_llm": "x"})
    assert a != fingerprint("mem0", "C01", hist[:4], [], {"memory_llm": "x"})
    assert a != fingerprint("mem0", "C01", hist, [], {"memory_llm": "y"})
    cache = DigestCache(tmp_path, "mem0")
    cache.save("C01", {"key": a, "memories": []})
    assert cache.load("C01", a) == {"key": a, "memories": []} and cache.load("C01", "other") is None
    cache.path("C01").write_text("{torn")
    assert cache.load("C01", a) is None


def test_an_unreachable_memory_llm_fails_before_anything(capa_data, tmp_path):
    from runners.llama_server import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    targets = [s for s in capa_data.heldout.values() if s.cell_id == "C01"]
    for name in ("mem0", "amem"):
        env = ConditionEnv(out=tmp_path, options={"memory_llm": f"openai:m@{url}"})
        with pytest.raises(CapaError, match=rf"no OpenAI-compatible server answers {url}/models.*start one there"):
            get_condition(name).contexts(targets, capa_data, env)
    assert not (tmp_path / "memory").exists()


def test_a_missing_memory_extra_is_named(capa_data, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "mem0" else real(n, *a))
    targets = [s for s in capa_data.heldout.values() if s.cell_id == "C01"]
    with pytest.raises(CapaError, match=r"needs mem0.*pip install -e '\.\[memory\]'"):
        get_condition("mem0").contexts(targets, capa_data, ConditionEnv(out=tmp_path, options={"memory_llm": "openai:m@http://127.0.0.1:9/v1"}))


def test_a_bad_memory_llm_spec_is_refused(capa_data, tmp_path):
    targets = [s for s in capa_data.heldout.values() if s.cell_id == "C01"]
    with pytest.raises(CapaError, match="expected llamacpp"):
        get_condition("mem0").contexts(targets, capa_data, ConditionEnv(out=tmp_path, options={"memory_llm": "gpt"}))
    with pytest.raises(CapaError, match="memory_scope=everything"):
        get_condition("mem0").contexts(targets, capa_data, ConditionEnv(out=tmp_path, options={"memory_scope": "everything"}))


@pytest.mark.slow
def test_mem0_with_the_embedded_model_through_the_real_llama_cpp_server(capa_data, tmp_path):
    """One cell, the default memory LLM: the condition starts llama.cpp's server on 127.0.0.1 with
    the embedded 0.5B model (n_ctx 16384), mem0 extracts through it, and the server is stopped.
    A 0.5B model is a smoke test: what it extracts is counted, not judged."""
    import httpx

    targets = sorted((s for s in capa_data.heldout.values() if s.cell_id == "C01"), key=lambda s: s.position)
    ctx = get_condition("mem0").contexts(targets, capa_data, ConditionEnv(out=tmp_path))
    digest = json.loads((tmp_path / "memory" / "mem0" / "C01.json").read_text())
    assert digest["llm"]["served_by_capa"] is True and digest["llm"]["spec"] == "llamacpp"
    assert digest["counts"]["extraction_calls"] == 5 and len(digest["calls"]) == 5
    assert digest["counts"]["extraction_failures"] + digest["counts"]["empty_extractions"] + \
        sum(c["status"] == "ok" for c in digest["calls"]) == 5
    assert digest["counts"]["memories"] == len(digest["memories"])
    assert all(c["raw"] is not None for c in digest["calls"])       # every call reached the server and answered
    log = (tmp_path / "memory-llm-server.log").read_text()
    assert "n_ctx" in log or "llama" in log.lower()
    with pytest.raises(httpx.HTTPError):                            # stopped once the contexts were built
        httpx.get(digest["llm"]["base_url"] + "/models", timeout=2)
    c = ctx[targets[0].session_id]
    assert (c["text"] == "") == (c["memory"]["shown"] == 0)
