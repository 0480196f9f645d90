"""`capa view`'s data (no browser): contexts stored once per run by digest, reveal marks, the
data script, and its errors."""

from __future__ import annotations

import json

import pytest

from capa_hf.cli import main
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.records import CONTEXTS, context_digest, read_contexts, store_contexts
from capa_hf.evaluation.run import run_eval
from capa_hf.prompts import prompt_text
from capa_hf.schema.record import SessionRecord
from capa_hf.view.collect import collect, run_names
from capa_hf.view.transcript import reveal_turns, session_view
from capa_hf.view.write import data_script
from tests.cli_run import one_line_error


def test_store_contexts_keeps_each_text_once(tmp_path):
    digests = store_contexts(tmp_path, ["a", "b", "a"])
    assert digests == {"a": context_digest("a"), "b": context_digest("b")}
    store_contexts(tmp_path, ["b", "c"])                   # a resumed run adds only the new text
    lines = (tmp_path / CONTEXTS).read_text().splitlines()
    assert [json.loads(x)["text"] for x in lines] == ["a", "b", "c"]
    with open(tmp_path / CONTEXTS, "a") as fh:            # a torn last line is ignored
        fh.write('{"sha256": "x", "te')
    assert read_contexts(tmp_path / CONTEXTS) == {context_digest(t): t for t in "abc"}


def test_a_run_records_what_the_model_saw(tmp_path, capa_data):
    run_eval(EvalConfig(model="reference:oracle", condition="same-user", cells=("C03",)), tmp_path / "r",
             data=capa_data, progress=False)
    recs = [json.loads(x) for x in (tmp_path / "r" / "sessions.jsonl").read_text().splitlines()]
    contexts = read_contexts(tmp_path / "r" / CONTEXTS)
    assert len(recs) == 5 and len(contexts) == 1           # the cell's 5 sessions share one history
    text = contexts[recs[0]["context_sha256"]]
    assert {r["context_sha256"] for r in recs} == {context_digest(text)}
    assert text.startswith(prompt_text("assistant_system")) and "C03-S01" not in text[:100]
    assert len(text) == len(prompt_text("assistant_system")) + 2 + recs[0]["context_chars"]


def _record(turns, log=None):
    return SessionRecord.from_dict({
        "session_id": "C09-S07", "trial": 0, "turns": turns, "turn_kinds": ["clarification", "submission"],
        "assistant_turns": 2, "user_log": log or [],
        "submissions": [{"turn": 2, "code": "def f(): pass", "candidate": "f", "binding": "entry_point",
                         "dropped": ["print(f())"], "rule": "last_block",
                         "verdict": {"status": "failed", "failure": {"type": "AssertionError",
                                                                     "message": "", "line": "assert f() == 1"}}}]})


HIDDEN = [{"id": "h1", "clarification": "Sort it ascending."}, {"id": "h2", "clarification": "Return a tuple."}]


def test_reveals_are_found_in_the_answer_or_in_an_llm_users_log():
    turns = [{"role": "user", "content": "Do it."}, {"role": "assistant", "content": "Which order?"},
             {"role": "user", "content": "Hmm. Sort it ascending. Return a tuple."},
             {"role": "assistant", "content": "```python\ndef f(): pass\n```"}]
    assert reveal_turns(_record(turns), HIDDEN) == {1: ["h1", "h2"]}
    reworded = [*turns[:2], {"role": "user", "content": "Smallest first, please."}, turns[3]]
    log = [{"turn": 1, "planner": {"focus": "h1"}}]
    assert reveal_turns(_record(reworded, log), HIDDEN) == {1: ["h1"]}
    view = session_view(_record(reworded, log), 0, HIDDEN)
    assert [h["revealed_turn"] for h in view["hidden"]] == [1, None]
    sub = view["chat"][3]["submission"]
    assert sub["extraction"] == {"candidate": "f", "binding": "entry_point", "dropped": ["print(f())"],
                                 "rule": "last_block"}
    assert sub["failure"] == {"type": "AssertionError", "message": "", "line": "assert f() == 1"}
    assert [m.get("kind") for m in view["chat"]] == [None, "clarification", None, "submission"]


def test_the_data_script_cannot_end_its_script_element():
    text = data_script({"x": "</script><script>alert(1)</script>"})
    assert "</script" not in text and text.startswith("window.CAPA_VIEW = ")
    assert json.loads(text[len("window.CAPA_VIEW = "):-2]) == {"x": "</script><script>alert(1)</script>"}


def test_runs_with_one_name_are_told_apart(tmp_path):
    assert run_names([tmp_path / "a" / "none", tmp_path / "b" / "none", tmp_path / "c"]) == [
        "a/none", "b/none", "c"]


def test_a_run_without_contexts_is_shown_with_a_note(tmp_path, capa_data):
    run = tmp_path / "old"
    run_eval(EvalConfig(model="reference:oracle", condition="none", cells=("C02",), limit=1), run, data=capa_data, progress=False)
    (run / CONTEXTS).unlink()
    data = collect([run])
    assert data["sessions"][0]["context"] is not None and data["contexts"] == {}
    assert any("no contexts.jsonl" in n for n in data["notes"])
    assert [h["id"] for h in data["sessions"][0]["hidden"]] == [
        h.id for h in capa_data.heldout[data["sessions"][0]["session_id"]].hidden_items]


@pytest.mark.parametrize("argv, expected", [
    (["view", "NOPE", "--out", "x"], "NOPE: no such run folder"),
    (["view", "--out", "x"], "the following arguments are required: runs"),
    (["view", ".", "--out", "x"], ".: not a run folder (no config.json)"),
    (["view", "r", "--out", "x", "--outdir", "y"], "unrecognized arguments: --outdir y"),
])
def test_bad_view_input_is_one_line_and_exit_2(argv, expected, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one_line_error(argv, capsys, expected)


def test_an_unwritable_out_is_one_line(tmp_path, capsys, capa_data):
    run = tmp_path / "r"
    run_eval(EvalConfig(model="reference:oracle", condition="none", cells=("C02",), limit=1), run, data=capa_data, progress=False)
    blocker = tmp_path / "file"
    blocker.write_text("")
    one_line_error(["view", str(run), "--out", str(blocker / "site")], capsys,
                   f"--out {blocker / 'site'}: cannot write the viewer there")

