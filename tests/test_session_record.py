"""The typed session record reads every sessions.jsonl line as written and gives it back unchanged."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from capa_hf.schema.record import SessionRecord
from tests.run_fakes import record


def _all_described(model) -> list[str]:
    out = []
    for name, f in model.model_fields.items():
        if not f.description:
            out.append(f"{model.__name__}.{name}")
        ann = f.annotation
        for sub in getattr(ann, "__args__", ()) + (ann,):
            inner = getattr(sub, "__args__", ())
            for m in (sub, *inner):
                if isinstance(m, type) and hasattr(m, "model_fields") and m is not model:
                    out += _all_described(m)
    return out


@pytest.mark.parametrize("rec", [record("C01-06", 2), record("C01-07", None), record("C01-08", 1, incomplete=True)])
def test_a_record_round_trips_key_for_key(rec):
    rec = {**rec, "gate": {"sufficient": True}, "variant_id": "HumanEval/0@x"}   # a condition's own field kept
    typed = SessionRecord.from_dict(json.loads(json.dumps(rec)))
    assert typed.to_dict() == rec
    assert typed.solved == rec["solved"] and typed.incomplete == bool(rec.get("incomplete"))
    if rec["submissions"]:
        assert typed.submissions[-1].verdict.status == rec["submissions"][-1]["verdict"]["status"]
        assert typed.submissions[0].verdict.failure is None or typed.submissions[0].verdict.failure.line


def test_a_record_of_a_played_run_round_trips(tmp_path):
    from capa_hf.analysis.blank_control import blank_config
    from capa_hf.evaluation.config import EvalConfig
    from capa_hf.evaluation.run import run_eval
    from tests.test_analysis_blank_control import fixer

    run_eval(blank_config(EvalConfig(model="scripted", condition="-", limit=1)), tmp_path, engine=fixer("wrong"),
             progress=False)
    line = json.loads((tmp_path / "sessions.jsonl").read_text().splitlines()[0])
    typed = SessionRecord.from_dict(line)
    assert typed.to_dict() == line and typed.success_turn == 2 and typed.turns[0].role == "user"


def test_a_malformed_record_is_refused_naming_the_field():
    with pytest.raises(ValidationError, match="submissions"):
        SessionRecord.from_dict({"session_id": "x", "submissions": [{"turn": "first"}]})


def test_every_field_is_described():
    assert _all_described(SessionRecord) == []


def test_every_schema_field_is_described():
    import importlib
    import inspect
    import pkgutil

    import capa_hf.schema as schema
    from pydantic import BaseModel

    missing = []
    for info in pkgutil.iter_modules(schema.__path__):
        module = importlib.import_module(f"capa_hf.schema.{info.name}")
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, BaseModel) and cls.__module__ == module.__name__:
                missing += [f"{info.name}.{name}.{f}" for f, fi in cls.model_fields.items() if not fi.description]
    assert missing == []


OLD_LINES = Path(__file__).parent / "data" / "sessions_before_typed.jsonl"   # written before records were typed


def _old_lines() -> list[str]:
    return OLD_LINES.read_text(encoding="utf-8").splitlines()


def test_lines_written_before_typed_records_read_and_write_back_byte_for_byte(tmp_path):
    from capa_hf.evaluation.records import read_records, rewrite

    lines = _old_lines()
    assert len(lines) == 7      # a gate run, the blank control, an engine error, a veto, an LLM user, a rescore, a crash
    for line in lines:
        assert json.dumps(SessionRecord.from_dict(json.loads(line)).to_dict(), ensure_ascii=False) == line
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    records = read_records(path)
    assert all(isinstance(r, SessionRecord) for r in records.values())
    rewrite(path, records)
    written = path.read_text(encoding="utf-8").splitlines()
    # two keys were written twice (the gate and the veto run share C01-S06#0, the LLM user's run and its
    # rescore C03-S06#0): the latest line of each is kept, and every line kept is an old line, byte for byte
    assert len(written) == len(records) == 5 and set(written) <= set(lines)
    assert json.loads(written[0])["submissions"][0]["verdict"]["status"] == "vetoed"


def test_the_old_lines_read_as_attributes():
    recs = [SessionRecord.from_dict(json.loads(line)) for line in _old_lines()]
    gate, blank, broken, veto, llm_user, rescored, crashed = recs
    assert gate.extra("gate")["session"] == 4 and "same habit" in gate.extra("digest")
    assert gate.extra("memory") is None and gate.extra("memory", {}) == {}
    assert blank.solved and blank.success_turn == 2 and blank.cell_id is None
    assert [s.verdict.status for s in blank.submissions] == ["failed", "passed"]
    assert blank.submissions[0].verdict.failure.type and blank.submissions[0].rule
    assert broken.incomplete and broken.error_text().startswith("HTTP 500") and broken.key == "C02-S06#0"
    assert veto.submissions[0].verdict.status == "vetoed" and veto.submissions[0].verdict.sandbox_status == "passed"
    assert veto.submissions[0].verdict.veto.vetoed and veto.submissions[0].verdict.veto.attempts
    assert "planner" in llm_user.user_log[0] and llm_user.usage[0].finish_reason == "stop"
    assert rescored.rescore.outcome == "unchanged" and rescored.submissions[0].previous_status == "passed"
    assert crashed.incomplete and crashed.trial == 1 and crashed.error_text().startswith("Traceback")


def test_a_record_written_now_keeps_the_old_key_order(tmp_path):
    """The blank control of the old fixture, played again: the same keys in the same order, all the way down."""
    from capa_hf.analysis.blank_control import blank_config
    from capa_hf.evaluation.config import EvalConfig
    from capa_hf.evaluation.run import run_eval
    from tests.test_analysis_blank_control import fixer

    def keys(value):
        if isinstance(value, dict):
            return [(k, keys(v)) for k, v in value.items()]
        return [keys(v) for v in value] if isinstance(value, list) else None

    run_eval(blank_config(EvalConfig(model="scripted", condition="-", limit=1)), tmp_path, engine=fixer("wrong"),
             progress=False)
    now = json.loads((tmp_path / "sessions.jsonl").read_text().splitlines()[0])
    before = json.loads(_old_lines()[1])
    assert keys(now) == keys(before)
    timing_free = {k: v for k, v in now.items() if k not in ("timing", "usage", "submissions")}
    assert timing_free == {k: v for k, v in before.items() if k not in ("timing", "usage", "submissions")}


def test_extras_are_read_and_set_by_name():
    rec = SessionRecord(session_id="S1")
    rec.add_extra("fallback", True)
    assert rec.extra("fallback") is True and rec.to_dict() == {"session_id": "S1", "fallback": True}
    with pytest.raises(ValueError, match="declared field"):
        rec.add_extra("solved", True)


def test_a_malformed_line_in_a_run_is_refused_naming_the_file_and_field(tmp_path):
    from capa_hf.errors import CapaError
    from capa_hf.evaluation.records import read_records

    path = tmp_path / "sessions.jsonl"
    path.write_text(_old_lines()[1] + "\n" + json.dumps({"session_id": "x", "solved": "perhaps"}) + "\n")
    with pytest.raises(CapaError, match=r"sessions.jsonl: record 2 is not a session record \(solved: "):
        read_records(path)
    path.write_text(_old_lines()[1] + "\n" + '{"session_id": "x", "tri')      # a torn last line is dropped
    assert list(read_records(path)) == ["HumanEval/0#0"]
