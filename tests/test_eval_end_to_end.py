"""End to end: a scripted assistant through `run_eval` under the raw-history conditions.

The scripted assistant either asks once and then submits the session variant's reference, or
submits a wrong function first and then the reference. The transcripts and metrics are exact.
"""

import json
import os

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.evaluation.conditions import render_history
from capa_hf.evaluation.run import EvalConfig, run_eval
from capa_hf.simulator.reply_lines import answered

QUESTION = "Hmm, could you clarify?"
WRONG = "```python\ndef guess(*args):\n    return None\n```"
CELL = "C02"


def assistant(data, mode):
    by_request = {s.initial_request: s for s in data.heldout.values()}

    def reply(messages):
        users = [m["content"] for m in messages if m["role"] == "user"]
        session = by_request[users[0]]
        n_assistant = sum(1 for m in messages if m["role"] == "assistant")
        code = data.problem(session).reference
        if n_assistant == 0:
            return QUESTION if mode == "ask" else WRONG
        return f"Here it is:\n```python\n{code}\n```"
    return ScriptedEngine(fn=reply, model=f"scripted-{mode}")


@pytest.mark.parametrize("mode", ["ask", "wrong_first"])
@pytest.mark.parametrize("condition", ["none", "same-user", "shuffled", "conflicting"])
def test_transcripts_and_metrics_are_exact(tmp_path, capa_data, mode, condition):
    engine = assistant(capa_data, mode)
    cfg = EvalConfig(model="scripted", condition=condition, cells=(CELL,), limit=3)
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data)
    records = [json.loads(line) for line in (tmp_path / "run" / "sessions.jsonl").read_text().splitlines()]
    assert len(records) == 3 and summary["n_sessions"] == 3
    for rec in records:
        target = capa_data.heldout[rec["session_id"]]
        first = target.hidden_items[0].clarification
        turns = rec["turns"]
        assert turns[0] == {"role": "user", "content": target.initial_request}
        assert turns[1]["role"] == "assistant"
        if mode == "ask":
            assert turns[1]["content"] == QUESTION
            assert turns[2] == {"role": "user", "content": first}
            assert rec["turn_kinds"] == ["clarification", "submission"]
            assert [s["verdict"]["status"] for s in rec["submissions"]] == ["passed"]
        else:
            assert turns[1]["content"] == WRONG
            entry = rec["user_log"][0]                # a failure: the item tied to the failing check
            assert entry["basis"] == "failure_tie" and entry["failing_line"] in turns[2]["content"]
            said = next(h.clarification for h in target.hidden_items if h.id == entry["item"])
            # the failure report, then the tied item's clarification (after a failure reaction the
            # persona's lead-in is dropped: one lead-in a message)
            wraps = capa_data.personas[target.persona_id].voice.clarification_wraps
            assert answered(said, turns[2]["content"], wraps) and turns[2]["content"] != said
            assert turns[2]["content"].index(entry["failing_line"]) < len(turns[2]["content"]) - len(said) // 2
            assert rec["turn_kinds"] == ["submission", "submission"]
            statuses = [s["verdict"]["status"] for s in rec["submissions"]]
            assert statuses[0] != "passed" and statuses[1] == "passed"
            assert rec["submissions"][0]["binding"] == "root_function"
        assert len(turns) == 4 and rec["success_turn"] == 2 and rec["solved"]
    reasons = summary["user_reasoning"]            # why the scripted user said what it said
    assert reasons["turns"] == 3 and reasons[("priority" if mode == "ask" else "failure_tie")] == 3
    assert "Scripted user, 3 turns" in (tmp_path / "run" / "summary.md").read_text()
    o = summary["overall"]
    assert o["ES"]["value"] == 1.0 and o["FT-ES"]["value"] == 0.0 and o["TTC"]["value"] == 2.0
    # the isolation the verdicts ran under is part of the result (as root: every layer)
    sb = json.loads((tmp_path / "run" / "summary.json").read_text())["sandbox"]
    assert {"seccomp", "rlimits"} <= set(sb["layers"]) and sb["memory_mb"] == 1024
    if os.geteuid() == 0:
        assert {"chroot", "pid_namespace", "drop_privileges"} <= set(sb["layers"])
        assert all(isinstance(n, str) for n in sb["notes"])
    assert "Sandbox: " in (tmp_path / "run" / "summary.md").read_text()

    system_prompts = {r.messages[0][1] for r in engine.seen}
    history = capa_data.cell_history(CELL)
    if condition == "none":
        assert all("Earlier session" not in s for s in system_prompts)
    elif condition == "same-user":
        assert len(system_prompts) == 1  # identical for every session of the cell: prefix caching applies
        assert render_history(history) in system_prompts.pop()
    else:
        assert len(system_prompts) == 1
        prompt = system_prompts.pop()
        assert all(h.initial_request not in prompt for h in history)
        sources = records[0]["context_sources"]
        heldout_tasks = {s.task_id for s in capa_data.heldout.values() if s.cell_id == CELL}
        assert len(sources) == 5
        for sid in sources:
            src = capa_data.history[sid]
            assert src.cell_id != CELL and src.task_id not in heldout_tasks


def test_killed_run_resumes_without_redoing_sessions(tmp_path, capa_data):
    engine = assistant(capa_data, "ask")
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,))
    out = tmp_path / "run"
    run_eval(EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=2, max_turns=4), out,
             engine=engine, progress=False, data=capa_data)
    with pytest.raises(Exception, match=r"another config \(differs in: max_turns\)"):
        run_eval(cfg, out, engine=engine, progress=False, data=capa_data)
    # same config: simulate a crash after two sessions by truncating the results, then rerun
    out2 = tmp_path / "run2"
    run_eval(cfg, out2, engine=engine, progress=False, data=capa_data)
    lines = (out2 / "sessions.jsonl").read_text().splitlines()
    (out2 / "sessions.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    fresh = assistant(capa_data, "ask")
    summary = run_eval(cfg, out2, engine=fresh, progress=False, data=capa_data)
    assert summary["resumed"] == 2 and summary["n_sessions"] == 5
    records = [json.loads(l) for l in (out2 / "sessions.jsonl").read_text().splitlines()]
    assert sorted(r["session_id"] for r in records) == sorted(s.session_id for s in capa_data.heldout.values()
                                                             if s.cell_id == CELL)
    finished = {json.loads(l)["session_id"] for l in lines[:2]}
    replayed = {r.messages[1][1] for r in fresh.seen}
    assert not replayed & {capa_data.heldout[sid].initial_request for sid in finished}


def test_report_compares_runs_and_plots(tmp_path, capa_data):
    from types import SimpleNamespace

    from capa_hf.analysis.report import report_cli

    for cond in ("none", "same-user"):
        run_eval(EvalConfig(model="scripted", condition=cond, cells=(CELL,), limit=2), tmp_path / cond,
                 engine=assistant(capa_data, "ask" if cond == "none" else "wrong_first"), progress=False,
                 data=capa_data)
    out = tmp_path / "report"
    assert report_cli(SimpleNamespace(runs=[str(tmp_path / "none"), str(tmp_path / "same-user")], out=str(out),
                                      no_progress=True)) == 0
    text = (out / "report.md").read_text()
    # both runs solve at turn 2 (a question, or a failed guess, then the reference): no difference
    assert "| scripted | none | 2 | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 2.00 [2.00, 2.00] |" in text
    assert ("| scripted | same-user | 2 | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 2.00 [2.00, 2.00] | "
            "+0.0 [+0.0, +0.0], p=1.000 |") in text
    report = json.loads((out / "report.json").read_text())
    assert [r["run"] for r in report["runs"]] == ["none", "same-user"]
    png = (out / "main.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    summary = json.loads((tmp_path / "none" / "summary.json").read_text())
    assert set(summary["per_mechanism"]) == set(capa_data.cell_history(CELL)[0].mechanisms)
