"""The embedded model (llama.cpp, Qwen2.5-Coder-0.5B) as both the assistant and the LLM user, on
one held-out session. Slow; CI runs it. A 0.5B model is a weak planner and writer, so the test
asserts the protocol (every turn planned, worded, checked and logged; fallbacks counted and
consistent with the log), not the model's quality."""

import json

import pytest

from capa_hf.evaluation.run import EvalConfig, run_eval
from capa_hf.simulator.fidelity import CHECK_NAMES


@pytest.mark.slow
def test_embedded_model_plays_assistant_and_llm_user(tmp_path, capa_data):
    from runners import make_engine

    engine = make_engine("llamacpp")
    cfg = EvalConfig(model="llamacpp", condition="none", cells=("C01",), limit=1, max_turns=2, max_tokens=128,
                     user="llm:llamacpp")
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data,
                       role_engine_overrides={"user": engine})
    rec = json.loads((tmp_path / "run" / "sessions.jsonl").read_text().splitlines()[0])
    assert summary["n_sessions"] == 1 and summary["n_incomplete"] == 0, summary.get("incomplete")
    target = capa_data.heldout[rec["session_id"]]
    users = [t["content"] for t in rec["turns"] if t["role"] == "user"]
    assert users[0] == target.initial_request
    log = rec["user_log"]
    assert [e["message"] for e in log] == users[1:]
    if rec["success_turn"] != 1:
        assert len(log) >= 1, "the assistant failed turn 1, so the LLM user must have answered"
    hidden = {h.id for h in target.hidden_items}
    for entry in log:
        p = entry["planner"]
        assert 1 <= len(p["attempts"]) <= 2 and p["fallback"] == (not p["valid"])
        assert p["focus"] in hidden | {"failing_test", None}
        e = entry["expression"]
        assert 1 <= len(e["attempts"]) <= 2
        for att in e["attempts"]:
            assert [c["name"] for c in att["checks"]][:len(CHECK_NAMES)] == list(CHECK_NAMES)
        assert e["source"] == ("scripted" if e["fallback"] else "llm")
        assert "```" not in entry["message"] and entry["message"].strip()
    assert set(rec["revealed"]) <= hidden
    u = summary["llm_user"]
    assert u["turns"] == len(log)
    assert u["planner_fallbacks"] == sum(e["planner"]["fallback"] for e in log)
    assert u["expression_fallbacks"] == sum(e["expression"]["fallback"] for e in log)
    # the user's calls went through the driver in their own role, beside the assistant's
    assert summary["usage"]["calls"] >= rec["assistant_turns"] + 2 * len(log)
