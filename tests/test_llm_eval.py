"""The LLM roles through `run_eval`: an LLM user and a veto, each its own engine in its own driver
role, played by scripted engines with fixed JSON. Transcripts, logs and metrics are exact."""

import json

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.cli import main
from capa_hf.errors import CapaError
from capa_hf.evaluation.run import EvalConfig, run_eval
from capa_hf.schema.record import SessionRecord
from capa_hf.simulator.veto import without_vetoes
from tests.llm_fakes import SESSION, is_planner, plan_json

CELL = "C01"
QUESTION = "Quick check before I code: what are the inputs and the output?"


def assistant(data, first="ask", tag_second=False):
    """Asks (or submits the reference) first, then submits the session variant's reference."""
    by_request = {s.initial_request: s for s in data.heldout.values()}

    def reply(messages):
        users = [m["content"] for m in messages if m["role"] == "user"]
        code = data.problem(by_request[users[0]]).reference
        n = sum(1 for m in messages if m["role"] == "assistant")
        if n == 0 and first == "ask":
            return QUESTION
        if n == 0 and first == "wrong":
            return "```python\ndef guess(*a):\n    return None\n```"
        # a marker the veto can read in the code that runs: the extraction rule keeps every import
        mark = "\nimport string as SECOND_ATTEMPT" if (tag_second and n > 0) else ""
        return f"Here:\n```python\n{code}{mark}\n```"
    return ScriptedEngine(fn=reply, model=f"assistant-{first}")


def llm_user_engine(data, planner_by_session, default):
    """Planner: a fixed reply per session (found by its initial request); expression: a fixed line."""
    requests = {data.heldout[sid].initial_request: text for sid, text in planner_by_session.items()}

    def reply(req):
        msgs = req.message_dicts()
        if is_planner(msgs):
            return next((text for r, text in requests.items() if r in msgs[1]["content"]), default)
        convey = msgs[1]["content"].split("Point to get across: ", 1)
        return "To be clear: " + convey[1].split("\n", 1)[0] if len(convey) > 1 else "Go ahead with what you have."
    return ScriptedEngine(request_fn=reply, model="llm-user")


def records(path):
    return [json.loads(line) for line in (path / "sessions.jsonl").read_text().splitlines()]


def test_llm_user_plays_in_its_own_role(tmp_path, capa_data):
    engine, user = assistant(capa_data), llm_user_engine(capa_data, {SESSION: plan_json("h1")}, "garbage")
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=2, user="llm:scripted")
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data,
                       role_engine_overrides={"user": user})
    recs = {r["session_id"]: r for r in records(tmp_path / "run")}
    first = recs[SESSION]
    h1 = capa_data.heldout[SESSION].hidden_items[0].clarification
    assert first["turns"][2]["content"] == f"To be clear: {h1}"
    assert first["solved"] and first["success_turn"] == 2 and first["revealed"] == ["h1"]
    assert first["user_log"][0]["planner"]["json"] == json.loads(plan_json("h1"))
    assert len(user.seen) == (1 + 1) + (2 + 1) and all(r.messages[0][0] == "system" for r in user.seen)
    # the second session's planner answered garbage twice: the scripted planner's choice, counted
    other = next(r for sid, r in recs.items() if sid != SESSION)
    assert other["user_log"][0]["planner"]["fallback"]
    u = summary["llm_user"]
    assert u["turns"] == 2 and u["planner_fallbacks"] == 1 and u["planner_fallbacks_per_100_turns"] == 50.0
    assert u["expression_fallbacks"] == 0
    assert "fallbacks per 100 turns: planner 50.0, expression 0.0" in (tmp_path / "run" / "summary.md").read_text()
    # the model under test never saw a planner prompt; the user engine never saw the assistant's system prompt
    assert not any(is_planner(r.message_dicts()) for r in engine.seen)


def veto_engine(veto_unless=None):
    """Vetoes every pass, or every pass whose code lacks `veto_unless`."""
    def reply(req):
        code = req.messages[-1][1]
        agree = veto_unless is not None and veto_unless in code
        return json.dumps({"functionally_equivalent": agree, "reason": "agrees" if agree else "differs on []"})
    return ScriptedEngine(request_fn=reply, model="veto")


def test_a_veto_turns_a_pass_into_a_fail_and_es_is_reported_both_ways(tmp_path, capa_data):
    engine, veto = assistant(capa_data, first="reference", tag_second=True), veto_engine("SECOND_ATTEMPT")
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=2, judge="veto:sandbox", judge_model="scripted")
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data,
                       role_engine_overrides={"veto": veto})
    for rec in records(tmp_path / "run"):
        first, second = rec["submissions"]
        assert first["verdict"]["status"] == "vetoed" and first["verdict"]["sandbox_status"] == "passed"
        assert first["verdict"]["veto"]["vetoed"] and first["verdict"]["veto"]["reason"] == "differs on []"
        assert second["verdict"]["status"] == "passed" and not second["verdict"]["veto"]["vetoed"]
        assert rec["success_turn"] == 2
    v = summary["veto"]
    assert v["passes_assessed"] == 4 and v["vetoed"] == 2 and v["invalid_answers"] == 0
    assert v["with_vetoes"]["FT-ES"]["value"] == 0.0 and v["without_vetoes"]["FT-ES"]["value"] == 1.0
    assert v["with_vetoes"]["TTC"]["value"] == 2.0 and v["without_vetoes"]["TTC"]["value"] == 1.0
    assert summary["overall"]["FT-ES"]["value"] == 0.0          # as scored, a veto is a fail
    assert "2 of 4 passes vetoed" in (tmp_path / "run" / "summary.md").read_text()
    run = json.loads((tmp_path / "run" / "config.json").read_text())["run"]
    assert (run["judge"], run["judge_model"]) == ("veto:sandbox", "scripted")


def test_vetoing_every_pass_leaves_es_zero_and_without_vetoes_one(tmp_path, capa_data):
    engine, veto = assistant(capa_data, first="reference"), veto_engine()
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=1, max_turns=2, judge="veto:sandbox", judge_model="scripted")
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data,
                       role_engine_overrides={"veto": veto})
    assert summary["overall"]["ES"]["value"] == 0.0
    assert summary["veto"]["without_vetoes"]["ES"]["value"] == 1.0
    assert [v["turn"] for v in summary["veto"]["vetoes"]] == [1, 2]


def test_the_veto_is_never_asked_about_a_failing_submission(tmp_path, capa_data):
    engine, veto = assistant(capa_data, first="wrong"), veto_engine("def ")
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=1, judge="veto:sandbox", judge_model="scripted")
    run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data, role_engine_overrides={"veto": veto})
    rec = records(tmp_path / "run")[0]
    assert "veto" not in rec["submissions"][0]["verdict"] and rec["submissions"][1]["verdict"]["veto"]["valid"]
    assert len(veto.seen) == 1


def test_an_unusable_veto_answer_lets_the_pass_stand(tmp_path, capa_data):
    engine = assistant(capa_data, first="reference")
    veto = ScriptedEngine(default="I think it is fine?", model="veto")
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=1, judge="veto:sandbox", judge_model="scripted")
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data,
                       role_engine_overrides={"veto": veto})
    assert summary["overall"]["FT-ES"]["value"] == 1.0 and summary["veto"]["invalid_answers"] == 1
    assert len(veto.seen) == 2                                   # asked once more before giving up


def test_without_vetoes_only_flips_vetoed_verdicts():
    rec = SessionRecord.from_dict({"session_id": "S1", "submissions": [
        {"turn": 1, "code": "", "verdict": {"status": "failed"}},
        {"turn": 2, "code": "", "verdict": {"status": "vetoed", "sandbox_status": "passed"}}]})
    after = without_vetoes([rec])[0]
    assert [s.verdict.status for s in after.submissions] == ["failed", "passed"]
    assert after.submissions[1].verdict.sandbox_status == "passed"      # the rest of the verdict kept
    assert rec.submissions[1].verdict.status == "vetoed"                # the input is not changed


@pytest.mark.parametrize("value", ["llm", "llm:"])
def test_an_llm_user_without_an_engine_spec_is_refused(tmp_path, capa_data, value):
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=1, user=value)
    with pytest.raises(CapaError, match="llm:<engine spec>"):
        run_eval(cfg, tmp_path / "run", engine=assistant(capa_data), progress=False, data=capa_data)


@pytest.mark.parametrize("judge,model,message", [
    ("veto:sandbox", None, "this judge asks a model; give --judge-model"),
    ("veto", None, "this judge asks a model; give --judge-model"),
    ("sandbox", "scripted", "the judge 'sandbox' asks no model"),
    ("sandbox:veto", "scripted", "judge 'sandbox' wraps no other judge"),
    ("veto:veto", "scripted", "wraps must not ask a model of its own"),
    ("veto:nope", "scripted", "unknown judge 'nope'; expected one of sandbox, veto"),
])
def test_a_judge_without_its_model_or_with_a_model_it_does_not_ask_is_refused(tmp_path, capa_data, judge, model,
                                                                              message):
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=1, judge=judge, judge_model=model)
    with pytest.raises(CapaError, match=message):
        run_eval(cfg, tmp_path / "run", engine=assistant(capa_data), progress=False, data=capa_data)
    assert not (tmp_path / "run").exists()                     # refused before any work


@pytest.mark.parametrize("value", ["scripted", "llm:"])
def test_a_veto_without_an_engine_spec_is_refused(tmp_path, capsys, value):
    code = main(["eval", "--model", "scripted", "--veto", value, "--out", str(tmp_path / "r")])
    assert code == 2 and "llm:<engine spec>" in capsys.readouterr().err


def cli_config(monkeypatch, tmp_path, *flags):
    """The EvalConfig `capa eval` builds from `flags` (the run itself is not started)."""
    seen = {}

    def fake_run_eval(config, out, progress=True, **kw):
        seen["config"] = config
        raise CapaError("stop here")
    monkeypatch.setattr("capa_hf.evaluation.run.run_eval", fake_run_eval)
    assert main(["eval", "--model", "scripted", *flags, "--out", str(tmp_path / "r")]) == 2
    return seen["config"]


def test_cli_passes_role_engine_args(tmp_path, capsys, monkeypatch):
    cfg = cli_config(monkeypatch, tmp_path, "--user", "llm:llamacpp", "--user-engine-arg", "n_ctx=4096",
                     "--judge", "veto:sandbox", "--judge-model", "openai:m@http://x/v1", "--judge-engine-arg", "timeout=30")
    assert "stop here" in capsys.readouterr().err
    assert cfg.user == "llm:llamacpp" and cfg.user_engine_args == {"n_ctx": 4096}
    assert cfg.judge == "veto:sandbox" and cfg.judge_model == "openai:m@http://x/v1"
    assert cfg.judge_engine_args == {"timeout": 30}


@pytest.mark.parametrize("flags", [
    ("--veto", "llm:openai:m@http://x/v1", "--veto-engine-arg", "timeout=30"),
    ("--judge", "veto", "--judge-model", "openai:m@http://x/v1", "--veto-engine-arg", "timeout=30"),
    ("--judge", "veto:sandbox", "--veto", "llm:openai:m@http://x/v1", "--judge-engine-arg", "timeout=30"),
])
def test_veto_is_an_alias_of_the_veto_judge(tmp_path, monkeypatch, flags):
    cfg = cli_config(monkeypatch, tmp_path, *flags)
    run = cfg.to_dict()
    assert (run["judge"], run["judge_model"], run["judge_engine_args"]) == ("veto:sandbox", "openai:m@http://x/v1",
                                                                           {"timeout": 30})
    assert "veto" not in run                                    # one record of the judge, not two


def test_veto_and_judge_model_together_are_refused(tmp_path, capsys):
    code = main(["eval", "--model", "scripted", "--veto", "llm:a", "--judge-model", "b", "--out", str(tmp_path / "r")])
    assert code == 2 and "give --veto or --judge-model, not both" in capsys.readouterr().err


def test_an_engine_error_of_the_veto_or_the_user_leaves_the_session_incomplete(tmp_path, capa_data):
    from runners.types import ChatResult

    broken = ScriptedEngine(request_fn=lambda req: ChatResult.failure("HTTP 503"), model="down")
    for role, cfg_field, first in (("veto", {"judge": "veto:sandbox", "judge_model": "scripted"}, "reference"), ("user", {"user": "llm:scripted"}, "ask")):
        cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=1, **cfg_field)
        summary = run_eval(cfg, tmp_path / role, engine=assistant(capa_data, first=first), progress=False,
                           data=capa_data, role_engine_overrides={role: broken})
        assert summary["n_sessions"] == 0 and summary["n_incomplete"] == 1
        assert "engine error: HTTP 503" in summary["incomplete"][0]["error"]
