"""`capa eval --rescore`: recorded replies re-extracted and re-judged without a model.

The old run is played for real (scripted assistant, real sandbox) under a stand-in for the rule
before the dependency closure (only imports and defs run, so a module constant is lost); the
rescore then applies the current rule. The session semantics (earlier pass, lost pass, cut short,
different failure) are checked on hand-made records.
"""

import ast
import json
import re
from dataclasses import replace

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.analysis.report import build_report
from capa_hf.cli import main
from capa_hf.errors import CapaError
from capa_hf.evaluation.rescore import rescore_record, rescore_run
from capa_hf.schema.record import SessionRecord, SubmissionRecord
from capa_hf.evaluation.run import EvalConfig, run_eval
from capa_hf.simulator import episode
from capa_hf.simulator.extraction import extract_submission
from tests.run_fakes import record

CELL = "C02"


def through_a_table(reference: str, entry: str) -> str:
    """The reference with its entry point reached through a module-level table (a computed
    constant the old rule dropped)."""
    renamed = re.sub(rf"\b{entry}\b", f"_impl_{entry}", reference)
    return f'{renamed}\n\n_TABLE = {{"impl": _impl_{entry}}}\n\n\ndef {entry}(*args):\n    return _TABLE["impl"](*args)\n'


def assistant(data):
    by_request = {s.initial_request: s for s in data.heldout.values()}

    def reply(messages):
        session = by_request[[m["content"] for m in messages if m["role"] == "user"][0]]
        problem = data.problem(session)
        n = sum(1 for m in messages if m["role"] == "assistant")
        code = through_a_table(problem.reference, problem.entry_point) if n == 0 else problem.reference
        return f"Here:\n```python\n{code}\n```"
    return ScriptedEngine(fn=reply, model="scripted-table")


def old_rule(reply, entry_point):
    """Stand-in for the rule before the closure: imports and definitions only."""
    sub = extract_submission(reply, entry_point)
    if sub is None:
        return None
    tree = ast.parse(sub.code)
    tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
    return replace(sub, code=ast.unparse(tree) + "\n")


@pytest.fixture(scope="module")
def old_run(tmp_path_factory, capa_data):
    out = tmp_path_factory.mktemp("rescore") / "old"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(episode, "extract_submission", old_rule)
        run_eval(EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=2), out,
                 engine=assistant(capa_data), progress=False, data=capa_data)
    return out


def lines(path):
    return [json.loads(x) for x in (path / "sessions.jsonl").read_text().splitlines()]


def test_rescore_finds_the_earlier_pass_and_report_pairs_the_runs(old_run, capa_data, tmp_path):
    before = lines(old_run)
    assert [r["success_turn"] for r in before] == [2, 2]
    assert all(r["submissions"][0]["verdict"]["failure"]["type"] == "NameError" for r in before)
    summary = rescore_run(old_run, tmp_path / "new", data=capa_data)
    after = lines(tmp_path / "new")
    assert [r["success_turn"] for r in after] == [1, 1]
    for old, new in zip(before, after):
        assert new["turns"] == old["turns"][:2] and new["turn_kinds"] == ["submission"]
        assert new["submissions"][0]["previous_status"] == "error" and new["submissions"][0]["rule"] == "closure-1"
        assert new["rescore"] == {"rule": "closure-1", "outcome": "solved_earlier", "previous_success_turn": 2,
                                  "changed_turns": [1], "changes": [{"turn": 1, "was": "error", "now": "passed"}],
                                  "code_changed_turns": [1], "played_turns": 2, "truncated": True, "dropped_turns": 1,
                                  "cut_short": False, "feedback_differs": []}
    counts = summary["rescore"]
    assert (counts["submissions_before"], counts["submissions_changed"], counts["now_passing"]) == (4, 2, 2)
    assert counts["code_changed"] == 2 and counts["no_longer_passing"] == 0
    assert counts["sessions_changed"] == 2 and counts["truncated"] == 2 and counts["cut_short"] == 0
    assert summary["overall"]["FT-ES"]["value"] == 1.0 and summary["usage"]["calls"] == 0
    config = json.loads((tmp_path / "new" / "config.json").read_text())
    assert config["run"]["rescored_from"]["run"] == "old"
    rep = build_report([old_run, tmp_path / "new"], progress=False)["json"]["tables"]["rescore"]
    assert [r["scoring"] for r in rep["rows"]] == ["as recorded", "rescored (closure-1)"]
    new_row = rep["rows"][1]
    assert new_row["FT-ES"] == 1.0 and new_row["dFT-ES"] == 1.0 and new_row["dTTC"] == 1.0


def test_cli_rescore_prints_the_counts_and_refuses_model_flags(old_run, tmp_path, capsys):
    assert main(["eval", "--rescore", str(old_run), "--out", str(tmp_path / "cli")]) == 0
    err = capsys.readouterr().err
    assert "2 of 4 recorded submissions changed verdict (2 now pass, 0 no longer pass); the code that runs " \
        "changed in 2" in err
    assert main(["eval", "--rescore", str(old_run), "--model", "llamacpp", "--out", str(tmp_path / "x")]) != 0
    assert "takes every setting from the old run; drop --model" in capsys.readouterr().err
    assert main(["eval", "--rescore", str(old_run), "--out", str(old_run)]) != 0
    assert "needs its own folder" in capsys.readouterr().err


def test_rescore_refuses_a_veto_run_and_a_folder_without_config(old_run, tmp_path):
    with pytest.raises(CapaError, match="no config.json"):
        rescore_run(tmp_path, tmp_path / "out")
    veto = tmp_path / "veto"
    veto.mkdir()
    cfg = json.loads((old_run / "config.json").read_text())
    for asked in ({"judge": "veto:sandbox", "judge_model": "llamacpp"}, {"veto": "llm:llamacpp"}):  # (and as before)
        (veto / "config.json").write_text(json.dumps({**cfg, "run": {**cfg["run"], **asked}}))
        with pytest.raises(CapaError, match="asked .*llamacpp.*veto model"):
            rescore_run(veto, tmp_path / "out")


def sub(turn, status):
    return SubmissionRecord(turn=turn, code="def f(): pass", candidate="f", verdict={"status": status})


def typed(rec: dict) -> SessionRecord:
    return SessionRecord.from_dict(rec)


def test_a_recorded_pass_that_now_fails_is_unsolved_and_cut_short():
    rec = typed(record("S1", success_turn=3))                       # failed, failed, passed
    new = rescore_record(rec, {1: sub(1, "failed"), 2: sub(2, "failed"), 3: sub(3, "error")}, max_turns=8)
    assert new.success_turn is None and not new.solved and len(new.submissions) == 3
    assert new.rescore.outcome == "pass_lost" and new.rescore.cut_short
    assert new.rescore.changed_turns == [3] and not new.rescore.truncated
    assert [s.previous_status for s in new.submissions] == ["failed", "failed", "passed"]


def test_a_pass_lost_at_the_last_budgeted_turn_is_not_cut_short():
    rec = typed(record("S1", success_turn=8))
    subs = {t: sub(t, "failed") for t in range(1, 9)}
    assert not rescore_record(rec, subs, max_turns=8).rescore.cut_short


def test_a_different_failure_keeps_the_later_turns_and_says_so():
    rec = typed(record("S1", success_turn=2))
    new = rescore_record(rec, {1: sub(1, "error"), 2: sub(2, "passed")}, max_turns=8)
    assert new.success_turn == 2 and new.rescore.outcome == "unchanged"
    assert new.rescore.feedback_differs == [1] and new.turns == rec.turns


def test_a_reply_that_is_no_longer_a_submission_becomes_a_clarification():
    rec = typed(record("S1", success_turn=2))
    new = rescore_record(rec, {1: None, 2: sub(2, "passed")}, max_turns=8)
    assert new.turn_kinds == ["clarification", "submission"] and [s.turn for s in new.submissions] == [2]
    assert new.rescore.changed_turns == [1]
