"""The gate condition: verdict parsing, both context branches, the retry, the fallback, the cache."""

from __future__ import annotations

import json

import pytest

from runners import CompletionCache, ScriptedEngine

from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import ConditionEnv, get_condition, render_history
from capa_hf.evaluation.conditions.gate import VERDICTS, check_verdict, normalize_verdict
from capa_hf.evaluation.conditions.gate import gate_counts
from capa_hf.schema.record import SessionRecord


@pytest.mark.parametrize("value, problem", [
    ({"sufficient": True, "session": 3, "guidance": "shows the inclusive threshold"}, None),
    ({"sufficient": True, "session": "2", "guidance": ""}, None),
    ({"sufficient": False, "session": None, "guidance": "the container of the result"}, None),
    ({"sufficient": "yes", "session": 1, "guidance": "x"}, "true or false"),
    ({"sufficient": True, "session": 6, "guidance": "x"}, "1-5"),
    ({"sufficient": True, "session": None, "guidance": "x"}, "1-5"),
    ({"sufficient": True, "session": True, "guidance": "x"}, "1-5"),
    ({"sufficient": False, "session": None, "guidance": "  "}, "unresolved"),
    ({"sufficient": False, "guidance": 3}, "string"),
])
def test_check_verdict(value, problem):
    got = check_verdict(value, 5)
    assert (got is None) if problem is None else (problem in got)


def test_normalize_verdict_drops_the_session_when_not_sufficient():
    assert normalize_verdict({"sufficient": False, "session": 4, "guidance": " ask "}) == \
        {"sufficient": False, "session": None, "guidance": "ask"}
    assert normalize_verdict({"sufficient": True, "session": "2", "guidance": "g"})["session"] == 2


def _cell(capa_data, cell="C01"):
    targets = sorted((s for s in capa_data.heldout.values() if s.cell_id == cell), key=lambda s: s.position)
    return targets, capa_data.cell_history(cell)


def _run(capa_data, tmp_path, replies, targets=None):
    """Gate contexts for C01 with a scripted gate whose n-th reply per conversation is replies(n, msgs)."""
    targets = targets or _cell(capa_data)[0]

    def fn(msgs):
        return replies(sum(1 for m in msgs if m["role"] == "assistant"), msgs)

    engine = ScriptedEngine(fn=fn)
    with CompletionCache(tmp_path / "cache.sqlite") as cache:
        env = ConditionEnv(out=tmp_path, cache=cache, assistant=engine)
        ctx = get_condition("gate").contexts(targets, capa_data, env)
    return ctx, engine


def test_sufficient_highlights_one_session(capa_data, tmp_path):
    targets, hist = _cell(capa_data)
    ctx, engine = _run(capa_data, tmp_path, lambda n, m: json.dumps(
        {"sufficient": True, "session": 2, "guidance": "It shows how\nthis user wants factors."}))
    c = ctx[targets[0].session_id]
    assert c["sources"] == [hist[1].session_id]
    assert '<session index="2">' in c["text"] and hist[1].turns[0].content in c["text"]
    assert hist[0].turns[0].content not in c["text"]
    assert "Why this session: It shows how this user wants factors." in c["text"]
    assert c["gate"]["sufficient"] is True and c["gate"]["session"] == 2 and not c["gate"]["fallback"]
    assert c["digest"] == c["text"]
    # one call per (cell, request), batched: the five requests of the cell in one generate call
    assert engine.requests_served == len(targets) and engine.batch_sizes == [len(targets)]
    assert engine.seen[0].messages[0][0] == "system"
    assert all(any(s.initial_request in r.messages[-1][1] for r in engine.seen) for s in targets)


def test_insufficient_gives_the_guidance(capa_data, tmp_path):
    targets, hist = _cell(capa_data)
    ctx, _ = _run(capa_data, tmp_path, lambda n, m: 'Sure: {"sufficient": false, "session": null, '
                                                    '"guidance": "Ask whether the result is a list or a tuple."}')
    c = ctx[targets[1].session_id]
    assert "Ask whether the result is a list or a tuple." in c["text"]
    assert "<session" not in c["text"]
    assert c["sources"] == [s.session_id for s in hist]
    assert c["gate"]["sufficient"] is False and c["gate"]["session_id"] is None


def test_invalid_json_is_retried_once(capa_data, tmp_path):
    targets, _ = _cell(capa_data)
    ctx, engine = _run(capa_data, tmp_path, lambda n, m: "I think session 3." if n == 0 else
                       '{"sufficient": true, "session": 3, "guidance": "same boundary rule"}')
    c = ctx[targets[0].session_id]
    assert c["gate"]["attempts"] == 2 and c["gate"]["session"] == 3 and not c["gate"]["fallback"]
    retries = engine.seen[len(targets):]
    assert len(retries) == len(targets) and all(r.messages[-2] == ("assistant", "I think session 3.") for r in retries)


def test_two_bad_answers_fall_back_to_raw_history_and_are_counted(capa_data, tmp_path):
    targets, hist = _cell(capa_data)
    ctx, engine = _run(capa_data, tmp_path, lambda n, m: '{"sufficient": maybe}')
    assert engine.requests_served == 2 * len(targets)      # one retry each, no more
    c = ctx[targets[0].session_id]
    assert c["gate"]["fallback"] is True and c["gate"]["attempts"] == 2
    assert c["text"] == render_history(hist)
    records = [SessionRecord(session_id=t.session_id, cell_id=t.cell_id, gate=ctx[t.session_id]["gate"])
               for t in targets]
    stats = gate_counts(records)["gate"]
    assert stats == {"sessions": 5, "sufficient": 0, "sufficient_rate": 0.0, "unresolved": 0, "fallbacks": 5,
                     "retried": 5}


def test_verdicts_are_cached_in_the_run_folder(capa_data, tmp_path):
    targets, _ = _cell(capa_data)
    good = json.dumps({"sufficient": True, "session": 1, "guidance": "g"})
    first, _ = _run(capa_data, tmp_path, lambda n, m: good)
    lines = (tmp_path / VERDICTS).read_text().splitlines()
    assert len(lines) == len(targets) and json.loads(lines[0])["verdict"]["session"] == 1
    (tmp_path / "cache.sqlite").unlink()       # not the completion cache: the verdict file answers

    def boom(n, m):
        raise AssertionError("the gate was asked again")

    again, engine = _run(capa_data, tmp_path, boom)
    assert engine.requests_served == 0 and again == first


def test_an_engine_error_stops_the_condition(capa_data, tmp_path):
    from runners.types import ChatResult

    with pytest.raises(CapaError, match="gate model scripted:scripted failed"):
        _run(capa_data, tmp_path, lambda n, m: ChatResult.failure("server down"))
    assert not (tmp_path / VERDICTS).exists()


def test_a_separate_gate_model(capa_data, tmp_path):
    targets, _ = _cell(capa_data)
    built = {}

    def make(spec, options):
        built["spec"] = spec
        return ScriptedEngine(default='{"sufficient": false, "session": null, "guidance": "which order"}',
                              model="judge-7b")

    env = ConditionEnv(out=tmp_path, assistant=object(), make_engine=make, options={"gate_model": "scripted:judge"})
    ctx = get_condition("gate").contexts(targets[:1], capa_data, env)
    assert built["spec"] == "scripted:judge" and ctx[targets[0].session_id]["gate"]["model"] == "scripted:judge-7b"


def test_a_gate_run_records_verdicts_and_summarises_them(capa_data, tmp_path):
    from capa_hf.evaluation.config import EvalConfig
    from capa_hf.evaluation.records import RESULTS, read_records
    from capa_hf.evaluation.run import run_eval

    def reply(msgs):
        if msgs[0]["content"].startswith("You review a user's past coding sessions"):    # the gate
            return '{"sufficient": true, "session": 4, "guidance": "same habit"}'
        return "Which order should the result be in?"                                    # the assistant

    engine = ScriptedEngine(fn=reply)
    summary = run_eval(EvalConfig(model="scripted", condition="gate", cells=("C01",), limit=2, max_turns=1),
                       tmp_path / "run", engine=engine, progress=False, data=capa_data)
    recs = list(read_records(tmp_path / "run" / RESULTS).values())
    assert len(recs) == 2 and all(r.extra("gate")["session"] == 4 and r.context_sources == ["C01-S04"] for r in recs)
    assert all("Why this session: same habit" in r.extra("digest") for r in recs)
    assert summary["condition_stats"]["gate"]["sufficient_rate"] == 1.0
    md = (tmp_path / "run" / "summary.md").read_text()
    assert "Gate: sufficient 2/2 (100%)" in md
