"""The A-mem port: linking, evolution and retrieval on hand-made notes; the episode driven by hand;
the amem condition end to end against a scripted OpenAI-compatible server (real MiniLM)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from runners.types import ChatResult

from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions import ConditionEnv, get_condition
from capa_hf.memory import amem
from capa_hf.memory.amem import Note, Store, apply_evolution, build_store, parse_analysis, parse_evolution, retrieve
from tests.openai_stub import OpenAIStub, last_user


def unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def hand_store() -> Store:
    store = Store()
    for i, vec in enumerate([unit(1, 0, 0), unit(0.9, 0.1, 0), unit(0, 1, 0), unit(0, 0, 1), unit(0, 0.8, 0.2),
                             unit(0.5, 0.5, 0.5)]):
        store.add(Note(id=f"n{i}", content=f"note {i}", timestamp="session 1"), vec)
    return store


def test_nearest_ranks_by_cosine_and_breaks_ties_by_age():
    store = hand_store()
    assert store.nearest(unit(1, 0, 0), k=3) == [0, 1, 5]
    store.add(Note(id="n6", content="twin of 0", timestamp="session 2"), unit(1, 0, 0))
    assert store.nearest(unit(1, 0, 0), k=2) == [0, 6]


def test_retrieval_adds_linked_notes_after_each_hit_without_repeats():
    store = hand_store()
    store.notes[0].links = ["n3", "n1", "missing"]
    got = retrieve(store, unit(1, 0, 0), k=2)
    assert got == [0, 3, 1]                          # hit 0, its links n3 and n1 (n1 is also hit 2: once)
    store.notes[1].links = ["n4"]
    assert retrieve(store, unit(1, 0, 0), k=2) == [0, 3, 1, 4]


def test_strengthen_links_by_shown_number_or_id_and_retags():
    store = hand_store()
    new = Note(id="new", content="c", timestamp="session 2", tags=["old"])
    neighbors = [store.notes[i] for i in (2, 4, 0)]
    decision = parse_evolution({"should_evolve": True, "actions": ["strengthen"], "suggested_connections": [1, "n0", "7", "zz"],
                                "tags_to_update": ["a", "b"], "new_context_neighborhood": [], "new_tags_neighborhood": []}, 3)
    assert apply_evolution(new, neighbors, decision) is True
    assert new.links == ["n4", "n0"] and new.tags == ["a", "b"]


def test_update_neighbor_rewrites_the_shown_neighbours_in_order():
    store = hand_store()
    neighbors = [store.notes[3], store.notes[1]]
    decision = parse_evolution({"should_evolve": True, "actions": ["update_neighbor"], "suggested_connections": [],
                                "tags_to_update": [], "new_context_neighborhood": ["ctx A", "ctx B", "extra"],
                                "new_tags_neighborhood": [["ta"], ["tb"]]}, 2)
    apply_evolution(Note(id="new", content="c", timestamp="s"), neighbors, decision)
    assert (store.notes[3].context, store.notes[3].tags) == ("ctx A", ["ta"])
    assert (store.notes[1].context, store.notes[1].tags) == ("ctx B", ["tb"])
    assert store.notes[0].context == "General"      # not shown, not touched (the original's index bug)
    assert store.notes[3].evolution_history == [{"by": "new", "context": "General", "tags": []}]


def test_no_evolution_and_malformed_answers():
    assert apply_evolution(Note(id="x", content="c", timestamp="s"), [],
                           parse_evolution({"should_evolve": False, "actions": []}, 0)) is False
    assert parse_evolution({"should_evolve": "yes"}, 2) is None
    assert parse_evolution({"should_evolve": True, "actions": "strengthen"}, 2) is None
    assert parse_analysis({"keywords": ["a"], "context": "c", "tags": ["t"]}) == \
        {"keywords": ["a"], "context": "c", "tags": ["t"]}
    assert parse_analysis({"keywords": "a", "context": "c", "tags": []}) is None
    assert parse_analysis(None) is None


def _drive(episode, replies):
    """Run an episode generator by hand: replies(call) -> text."""
    calls, value = [], None
    try:
        call = next(episode)
        while True:
            calls.append(call)
            call = episode.send(ChatResult(text=replies(call), finish_reason="stop"))
    except StopIteration as stop:
        value = stop.value
    return calls, value


def test_the_episode_builds_notes_links_and_counts_failures():
    items = [("S1", "session 1", "user: sort ascending"), ("S1", "session 1", "assistant: done"),
             ("S2", "session 2", "user: ascending again")]
    vectors = np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0.95, 0.05, 0)])

    def replies(call):
        text = call.messages[-1]["content"]
        if "memory of linked notes" in text:                    # evolution
            return json.dumps({"should_evolve": True, "actions": ["strengthen"], "suggested_connections": [0],
                               "tags_to_update": ["order"], "new_context_neighborhood": [], "new_tags_neighborhood": []})
        if "done" in text:
            return "not json"
        return json.dumps({"keywords": ["sort", "ascending"], "context": "ordering", "tags": ["prefs"]})

    calls, (store, counts) = _drive(build_store(items, vectors, seed=1, key="C01"), replies)
    assert [c.role for c in calls] == ["memory"] * 5                # 3 analyses, 2 evolutions
    assert all(c.sampling.temperature == 0.7 and c.sampling.max_tokens == 1000 for c in calls)
    assert counts == {"notes": 3, "analysis_failures": 1, "empty_notes": 1, "evolution_calls": 2,
                      "evolution_failures": 0, "evolutions": 2, "links": 2}
    assert store.notes[1].context == "General" and store.notes[1].keywords == []
    assert store.notes[2].links == ["C01-n001"] and store.notes[2].tags == ["order"]   # nearest shown first


def test_an_engine_error_is_not_swallowed():
    episode = build_store([("S1", "session 1", "user: x")], np.stack([unit(1, 0)]), key="C01")
    next(episode)
    with pytest.raises(CapaError, match="memory LLM failed: boom"):
        episode.send(ChatResult.failure("boom"))


def _amem_reply(body):
    text = last_user(body)
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0.7
    if "memory of linked notes" in text:
        return json.dumps({"should_evolve": True, "actions": ["strengthen"], "suggested_connections": [0],
                           "tags_to_update": ["habit"], "new_context_neighborhood": [], "new_tags_neighborhood": []})
    return json.dumps({"keywords": ["request", "boundary"], "context": "a coding request", "tags": ["coding"]})


def test_amem_condition_end_to_end(capa_data, tmp_path):
    from runners import CompletionCache

    targets = sorted((s for s in capa_data.heldout.values() if s.cell_id == "C01"), key=lambda s: s.position)
    n_messages = sum(len(s.turns) for s in capa_data.cell_history("C01"))
    with OpenAIStub(_amem_reply) as srv, CompletionCache(tmp_path / "cache.sqlite") as cache:
        env = ConditionEnv(out=tmp_path, cache=cache, options={"memory_llm": srv.spec})
        ctx = get_condition("amem").contexts(targets[:2], capa_data, env)
        assert len(srv.requests) == 2 * n_messages - 1
        c = ctx[targets[0].session_id]
        assert c["text"].startswith("A memory system (A-mem)") and "context: a coding request" in c["text"]
        assert c["text"] == ctx[targets[1].session_id]["text"]          # scope cell: one text per cell
        counts = c["memory"]["cell_counts"]
        assert counts["notes"] == n_messages and counts["analysis_failures"] == 0 and counts["links"] == n_messages - 1
        assert set(c["sources"]) <= {s.session_id for s in capa_data.cell_history("C01")}
        digest = json.loads((tmp_path / "memory" / "amem" / "C01.json").read_text())
        assert len(digest["hits"]) == 5 and all(len(v) >= amem.K for v in digest["hits"].values())
        # the digest file answers a rerun
        again = get_condition("amem").contexts(targets, capa_data, env)
        assert len(srv.requests) == 2 * n_messages - 1 and again[targets[0].session_id]["text"] == c["text"]
        per_session = get_condition("amem").contexts(
            targets[:1], capa_data, ConditionEnv(out=tmp_path, cache=cache,
                                                 options={"memory_llm": srv.spec, "memory_scope": "session"}))
        assert per_session[targets[0].session_id]["memory"]["shown"] < c["memory"]["shown"]
