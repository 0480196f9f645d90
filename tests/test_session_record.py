"""The typed session record reads every sessions.jsonl line as written and gives it back unchanged."""
from __future__ import annotations

import json

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
