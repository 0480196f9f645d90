"""Engine errors are never scored: sessions stay incomplete, are counted, and a rerun retries
exactly them. Repeated trials get independent seeds. Options reach the engine and config.json."""

import json

import pytest
from runners.scripted import ScriptedEngine
from runners.types import ChatResult

from capa_hf.cli import main
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.metrics import pass_hat_k, summarize
from capa_hf.evaluation.run import TooManyErrors, run_eval
from capa_hf.schema.record import SessionRecord
from capa_hf.version import PIPELINE_VERSION as V

CELL = "C03"


def solver(data, fail_for=frozenset(), http=400):
    """Submits the variant's reference at turn 1; answers HTTP errors for the sessions named."""
    by_request = {s.initial_request: s for s in data.heldout.values()}

    def reply(request):
        users = [c for r, c in request.messages if r == "user"]
        session = by_request[users[0]]
        if session.session_id in fail_for:
            return ChatResult.failure(f"HTTP {http}: the server refused the request")
        return f"```python\n{data.problem(session).reference}\n```"
    return ScriptedEngine(request_fn=reply, model="solver")


def records(out):
    return [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]


def test_engine_errors_leave_sessions_incomplete_and_a_rerun_completes_them(tmp_path, capa_data):
    targets = sorted(s.session_id for s in capa_data.heldout.values() if s.cell_id == CELL)
    broken = frozenset(targets[:2])
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), max_errors=3)
    out = tmp_path / "run"
    summary = run_eval(cfg, out, engine=solver(capa_data, broken), progress=False, data=capa_data)
    assert summary["n_incomplete"] == 2 and summary["n_sessions"] == 3
    assert summary["overall"]["ES"]["value"] == 1.0            # the failures are not scored as unsolved
    assert all("HTTP 400" in i["error"] for i in summary["incomplete"])
    assert "2 sessions incomplete" in (out / "summary.md").read_text()
    bad = [r for r in records(out) if r.get("incomplete")]
    assert sorted(r["session_id"] for r in bad) == sorted(broken)
    # a rerun of the same command retries exactly the incomplete sessions
    again = solver(capa_data)
    summary = run_eval(cfg, out, engine=again, progress=False, data=capa_data)
    assert summary["n_incomplete"] == 0 and summary["n_sessions"] == 5 and summary["resumed"] == 3
    retried = {[c for r, c in req.messages if r == "user"][0] for req in again.seen}
    assert retried == {capa_data.heldout[s].initial_request for s in broken}


def test_too_many_errors_abort_without_losing_finished_sessions(tmp_path, capa_data):
    targets = sorted(s.session_id for s in capa_data.heldout.values() if s.cell_id == CELL)
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), max_errors=1)
    out = tmp_path / "run"
    with pytest.raises(TooManyErrors, match="--max-errors 1"):
        run_eval(cfg, out, engine=solver(capa_data, frozenset(targets[:3]), http=500), progress=False,
                 data=capa_data)
    recs = records(out)
    bad = [r for r in recs if r.get("incomplete")]
    good = [r for r in recs if not r.get("incomplete")]
    assert len(bad) == 2                      # the run stops at the second engine failure (limit 1)
    assert {r["session_id"] for r in bad} <= set(targets[:3])
    assert all("HTTP 500" in r["error"]["error"] for r in bad)
    assert {r["session_id"] for r in good} <= set(targets[3:]) and all(r["solved"] for r in good)
    # nothing finished is lost: a rerun with a working engine keeps them and plays the rest
    summary = run_eval(cfg, out, engine=solver(capa_data), progress=False, data=capa_data)
    assert summary["resumed"] == len(good) and summary["n_sessions"] == 5 and summary["n_incomplete"] == 0


def test_samples_run_independent_trials_with_distinct_seeds(tmp_path, capa_data):
    engine = solver(capa_data)
    cfg = EvalConfig(model="scripted", condition="none", cells=(CELL,), limit=2, samples=3, temperature=0.7)
    summary = run_eval(cfg, tmp_path / "run", engine=engine, progress=False, data=capa_data)
    recs = records(tmp_path / "run")
    assert sorted((r["session_id"], r["trial"]) for r in recs) == sorted(
        (s, t) for s in {r["session_id"] for r in recs} for t in range(3))
    seeds = {req.sampling.seed for req in engine.seen}
    assert len(seeds) == 6                                      # 2 sessions x 3 trials, one turn each
    assert summary["trials"]["trials"] == 3 and summary["trials"]["pass_hat_k"]["3"] == 1.0


def test_pass_hat_k_on_hand_made_records():
    # session a: 2 of 3 trials pass; session b: 3 of 3; session c: 0 of 3
    assert pass_hat_k([(2, 3), (3, 3), (0, 3)], 1) == pytest.approx((2 / 3 + 1 + 0) / 3)
    assert pass_hat_k([(2, 3), (3, 3), (0, 3)], 2) == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert pass_hat_k([(2, 3), (3, 3), (0, 3)], 3) == pytest.approx(1 / 3)

    def rec(sid, trial, ok):
        subs = [{"turn": 1, "code": "", "verdict": {"status": "passed" if ok else "failed"}}]
        return SessionRecord(session_id=sid, trial=trial, submissions=subs, persona_id="P01", mechanisms=["x", "y"])
    rs = [rec(s, t, ok) for s, oks in (("a", (1, 1, 0)), ("b", (1, 1, 1)), ("c", (0, 0, 0)))
          for t, ok in enumerate(oks)]
    out = summarize(rs, n_boot=200)
    assert out["overall"]["ES"]["value"] == pytest.approx(5 / 9) and out["overall"]["sessions"] == 3
    assert out["trials"]["pass_hat_k"]["2"] == pytest.approx((1 / 3 + 1) / 3)


def test_engine_args_and_preset_reach_the_engine_and_config_json(tmp_path, capsys):
    out = tmp_path / "r"
    code = main(["eval", "--model", "scripted", "--engine-arg", "default=I am not sure.", "--condition", "none",
                 "--cells", CELL, "--limit", "1", "--top-k", "20", "--out", str(out), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["run"]["engine_args"] == {"default": "I am not sure."} and cfg["run"]["top_k"] == 20
    assert cfg["dataset_version"] == V and len(cfg["dataset_manifest_sha256"]) == 64
    rec = records(out)[0]
    assert rec["turns"][1]["content"] == "I am not sure."         # the engine got the option
    code = main(["eval", "--model", "scripted", "--engine-arg", "colour=blue", "--condition", "none",
                 "--out", str(tmp_path / "r2")])
    err = capsys.readouterr().err
    assert code == 2 and "colour" in err and "default" in err    # unknown option, with the known ones


def test_unknown_user_is_refused_with_the_known_ones(tmp_path, capsys):
    code = main(["eval", "--model", "scripted", "--user", "telepath", "--condition", "none",
                 "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "telepath" in err and "scripted" in err
