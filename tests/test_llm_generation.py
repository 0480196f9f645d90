"""Stage 1 with an LLM realizer and Stage 3's LLM consistency check, played by scripted engines.

The realizer's requests go through every Stage 3 check (a leaked hidden fact is refused and
regenerated with the next seed); the consistency check compares each trace with its cell and the
cell's previously accepted trace, and a "no" regenerates the session.
"""

import json
import re

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.generation.pipeline import World, generate, plan_cells, stage1_all, stage3, voice_slots
from capa_hf.generation.stage1_llm import FALLBACK, LLMRealizer
from capa_hf.generation.stage3_llm import LLMConsistency
from capa_hf.schema.record import SessionRecord
from capa_hf.prompts import prompt_text


@pytest.fixture(scope="module")
def world():
    return World.load()


@pytest.fixture(scope="module")
def cell(design0):
    # a cell without domain-cognitive polysemy, so the gist reaches the realizer unchanged
    return next(c for c in design0 if "domain_cognitive" not in c.mechanisms)


def section(prompt: str, title: str) -> list[str]:
    block = prompt.split(title, 1)[1].split("\n\n", 1)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("- ") and not line.startswith("- (none")]


def hidden_facts(world, cell) -> dict[str, str]:
    """gist -> the plain text of the first hidden task keypoint of that session (if any)."""
    out = {}
    for plan in plan_cells([cell], world, 0).values():
        task = next((i for i in plan.items if i.kind == "task"), None)
        if task is not None:
            out[world.content.tasks[plan.task_id].gist] = task.keypoint.plain
    return out


def realizer_engine(world, cell, leak_first=True, code_first=False):
    facts = hidden_facts(world, cell)

    def reply(req):
        system, prompt = req.messages[0][1], req.messages[1][1]
        assert system == prompt_text("stage1_llm_system")
        gist = prompt.split("WHAT THE FUNCTION IS FOR:\n", 1)[1].split("\n", 1)[0]
        body = " ".join([f"Here is what I need: {gist}", *section(prompt, "FACTS THEY STATE PLAINLY:"),
                         *section(prompt, "VAGUE PHRASES THEY USE (copy word for word):")])
        first = req.sampling.temperature == 0.0
        if first and leak_first and gist in facts:
            body += " " + facts[gist]
        if first and code_first:
            body += "\n```python\ndef f(x):\n    return x\n```"
        return body
    return ScriptedEngine(request_fn=reply, model="realizer")


def test_llm_requests_are_batched_and_leaks_are_refused_by_stage3(world, cell):
    engine = realizer_engine(world, cell)
    plans = plan_cells([cell], world, 0)
    slots = voice_slots([cell])
    drafts = stage1_all([(cell, plans[sid], slots[sid]) for sid in plans], world, LLMRealizer(engine, "scripted"), 0, 0)
    assert engine.batch_sizes == [10]                       # one batch for the whole attempt
    leaked = 0
    for d in drafts:
        r = d.realization
        assert r.realizer == "llm:scripted" and r.initial_request.startswith(r.opener.rstrip("."))
        assert not any(h.clarification in r.initial_request for h in r.hidden_items if h.kind == "convention")
        checks = {c.name: c for c in stage3(d, SessionRecord(session_id=d.session_id, solved=True), world)}
        assert checks["llm_request"].ok and checks["persona_voice"].ok and checks["both_mechanisms"].ok
        if any(i.kind == "task" for i in d.plan.items):
            leaked += 1
            assert not checks["no_leak"].ok and re.search(r"h\d:plain", checks["no_leak"].detail)
        else:
            assert checks["no_leak"].ok, checks["no_leak"].detail
    assert leaked >= 1, "the pinned cell hides no task item; pick another"


def test_a_leaking_llm_request_is_regenerated_with_the_next_seed(world, cell):
    engine = realizer_engine(world, cell)
    _, sessions, stats, _ = generate(seed=0, realizer=LLMRealizer(engine, "scripted"), cells=[cell], progress=False)
    leaky = {s.session_id for s in sessions if any(h.kind == "task" for h in s.hidden_items)}
    assert leaky and stats.checks["no_leak"] == len(leaky) and stats.regenerated == len(leaky)
    for s in sessions:
        assert s.generator.realizer == "llm:scripted" and s.initial_request.count("Here is what I need") == 1
        assert s.generator.attempt == (1 if s.session_id in leaky else 0)
    assert engine.batch_sizes == [10, len(leaky)]
    assert [r.sampling.temperature for r in engine.seen[10:]] == [0.7] * len(leaky)
    assert any("llm_request" in line for line in stats.lines())


def test_code_in_a_request_is_refused_and_the_last_attempt_falls_back_to_the_template(world, cell, monkeypatch):
    monkeypatch.setattr("capa_hf.generation.stage1_llm.MAX_ATTEMPTS", 2)
    monkeypatch.setattr("capa_hf.generation.pipeline.MAX_ATTEMPTS", 2)
    engine = ScriptedEngine(request_fn=lambda req: "Just do it like\n```python\ndef f(x): pass\n```", model="coder")
    _, sessions, stats, _ = generate(seed=0, realizer=LLMRealizer(engine, "scripted"), cells=[cell], progress=False)
    assert stats.checks["llm_request"] == 10 and stats.realizer_fallbacks == 10
    assert all(s.generator.realizer == FALLBACK and s.generator.attempt == 1 for s in sessions)
    assert engine.requests_served == 10                     # the fallback attempt calls no model


def consistency_engine(cell, refuse_once="S03", garbage="S05"):
    seen = set()

    def reply(req):
        prompt = req.messages[1][1]
        sid = re.search(r"\(session (C\d\d-S\d\d)\)", prompt).group(1)
        if sid.endswith(garbage):
            return "looks fine to me"
        if sid.endswith(refuse_once) and sid not in seen:
            seen.add(sid)
            return json.dumps({"consistent": False, "reason": "the tone changes completely"})
        return json.dumps({"consistent": True, "reason": "same person, same habits"})
    return ScriptedEngine(request_fn=reply, model="checker")


def test_an_inconsistent_trace_is_regenerated_and_counts_reach_the_card_lines(world, cell):
    engine = consistency_engine(cell)
    _, sessions, stats, traces = generate(seed=0, cells=[cell], progress=False,
                                          consistency=LLMConsistency(engine, "scripted"))
    by_pos = {s.position: s for s in sessions}
    assert by_pos[3].generator.attempt == 1 and all(s.generator.attempt == 0 for p, s in by_pos.items() if p != 3)
    c = stats.consistency
    assert (c["checked"], c["consistent"], c["inconsistent"], c["invalid"], c["kept"]) == (11, 9, 1, 1, 0)
    assert stats.checks["consistency"] == 1 and stats.regenerated == 1
    sid = {p: s.session_id for p, s in by_pos.items()}
    assert traces[sid[1]].extra("consistency")["previous"] is None
    assert traces[sid[2]].extra("consistency")["previous"] == sid[1]
    assert traces[sid[4]].extra("consistency")["previous"] == sid[2]    # S03 was refused in that round
    assert traces[sid[3]].extra("consistency")["previous"] == sid[2]    # and checked again in the next
    assert traces[sid[5]].extra("consistency") == {"consistent": None, "reason": "no usable answer", "valid": False,
                                             "previous": sid[4]}
    # one batch per position in the first attempt, then one for the regenerated session
    assert engine.batch_sizes[:10] == [1] * 10
    line = next(x for x in stats.lines() if x.startswith("consistency check by llm:scripted"))
    assert "11 checks, 9 consistent, 1 inconsistent (regenerated), 1 unusable answers" in line
    first = next(r for r in engine.seen if f"(session {sid[2]})" in r.messages[1][1])
    assert by_pos[1].initial_request[:40] in first.messages[1][1]   # the previous trace is shown


def test_an_inconsistent_trace_on_the_last_attempt_is_kept_and_counted(world, cell, monkeypatch):
    monkeypatch.setattr("capa_hf.generation.pipeline.MAX_ATTEMPTS", 1)
    engine = ScriptedEngine(request_fn=lambda req: '{"consistent": false, "reason": "no"}', model="checker")
    _, sessions, stats, _ = generate(seed=0, cells=[cell], progress=False, consistency=LLMConsistency(engine))
    assert len(sessions) == 10 and stats.consistency["kept"] == 10 and stats.regenerated == 0


def test_build_cli_makes_one_engine_per_spec_and_refuses_bad_specs(tmp_path, capsys, monkeypatch):
    from capa_hf.cli import main

    made, seen = [], {}

    def fake_engine(spec, **options):
        made.append((spec, options))
        return ScriptedEngine(default="x", model=spec)

    def fake_build(out, **kw):
        seen.update(kw)
        return {"stage3": ["stage 3 line"], "stats": {}, "sessions": 0, "seconds": 0, "version": "v", "out": str(out)}
    monkeypatch.setattr("runners.make_engine", fake_engine)
    monkeypatch.setattr("capa_hf.dataset.build.build_dataset", fake_build)
    code = main(["build", "--out", str(tmp_path / "ds"), "--assistant", "vllm:m", "--assistant-engine-arg",
                 "tensor_parallel_size=2", "--realizer", "llm:vllm:m", "--consistency", "llm:openai:c@http://h/v1",
                 "--quiet"])
    assert code == 0 and made == [("vllm:m", {"tensor_parallel_size": 2}), ("openai:c@http://h/v1", {})]
    assert seen["realizer"].engine is seen["engine"] and seen["realizer"].name == "llm:vllm:m"
    assert seen["consistency"].name == "llm:openai:c@http://h/v1" and seen["consistency"].cache is seen["cache"]
    assert main(["build", "--out", str(tmp_path / "ds"), "--realizer", "vllm:m"]) == 2
    assert "--realizer 'vllm:m': expected llm:<engine spec>" in capsys.readouterr().err
    assert main(["build", "--out", str(tmp_path / "ds"), "--assistant-engine-arg", "a=1"]) == 2
