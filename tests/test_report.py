"""`capa report`: every table from small scripted runs, and the refusals."""

import json
import shutil

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.analysis.difficulty import labels_from_run
from capa_hf.analysis.report import build_report
from capa_hf.cli import main
from capa_hf.dataset.stats import dataset_stats
from capa_hf.errors import CapaError
from capa_hf.evaluation.difficulty_labels import write_labels
from capa_hf.evaluation.metrics import es, ft_es, ttc
from capa_hf.evaluation.records import read_records
from capa_hf.evaluation.run import EvalConfig, run_eval
from tests.run_fakes import record, write_run
from tests.test_analysis_blank_control import fixer, run_blank
from capa_hf.version import PIPELINE_VERSION as V

CELLS = ("C01",)
ALL_TABLES = ["runs", "main", "difficulty", "identity", "memory", "mechanisms", "item_kind", "blank", "split",
              "trials"]


def policy(data, condition):
    """A scripted assistant: without history it asks (position % 3) questions and never solves
    position 10; with same-user history it submits at once when history resolves every hidden
    item; a trial's seed decides between one and two questions otherwise."""
    sessions = {s.initial_request: s for s in [*data.heldout.values(), *data.history.values()]}

    def reply(request):
        messages = request.message_dicts()
        s = sessions[messages[1]["content"]]
        asked = sum(1 for m in messages if m["role"] == "assistant")
        if condition == "same-user":
            resolvable = all(h.resolvable_from_history for h in s.hidden_items)
            questions = 0 if resolvable else 1 + (request.sampling.seed or 0) % 2
        else:
            questions = s.position % 3 - (1 if condition in ("shuffled", "conflicting") and s.position % 3 else 0)
        if condition == "none" and s.position == 10:
            return "```python\ndef nope(*a):\n    return None\n```"
        if asked < questions:
            return "Could you say more?"
        return f"```python\n{data.problem(s).reference}\n```"
    return ScriptedEngine(request_fn=reply, model="scripted")


def records(run):
    return [json.loads(line) for line in (run / "sessions.jsonl").read_text().splitlines()]


def typed_records(run):
    return list(read_records(run / "sessions.jsonl").values())


def as_condition(src, dst, condition, first_turn_for_all=False):
    """A copy of a run under another condition name (mem0/amem/gate have no scripted path here):
    its records, optionally with every session solved at turn 1."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["run"]["condition"] = condition
    (dst / "config.json").write_text(json.dumps(cfg))
    recs = records(dst)
    for r in recs:
        r["condition"] = condition
        if first_turn_for_all:
            passed = [s for s in r["submissions"] if s["verdict"]["status"] == "passed"][:1]
            r["submissions"] = [{**s, "turn": 1} for s in passed]
    (dst / "sessions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return dst


@pytest.fixture(scope="module")
def runs(tmp_path_factory, capa_data):
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, cond, split, samples in (("none", "none", "heldout", 1), ("same-user", "same-user", "heldout", 2),
                                       ("shuffled", "shuffled", "heldout", 1),
                                       ("conflicting", "conflicting", "heldout", 1),
                                       ("none-history", "none", "history", 1)):
        cfg = EvalConfig(model="scripted", condition=cond, cells=CELLS, split=split, samples=samples, seed=3)
        run_eval(cfg, root / name, engine=policy(capa_data, cond), progress=False, data=capa_data)
        out[name] = root / name
    out["gate"] = as_condition(out["same-user"], root / "gate", "gate", first_turn_for_all=True)
    out["mem0"] = as_condition(out["same-user"], root / "mem0", "mem0")
    run_blank(EvalConfig(model="scripted", condition="-", limit=2), root / "blank", engine=fixer("wrong"),
              progress=False)
    out["blank"] = root / "blank"
    out["labels"] = write_labels(labels_from_run(out["none"]), root / "labels")
    return out


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    paths = [runs[k] for k in ("none", "same-user", "shuffled", "conflicting", "none-history", "gate", "mem0", "blank")]
    result = build_report(paths, out=out, difficulty=runs["labels"], progress=False)
    return out, result


def table(report, key):
    return report[1]["json"]["tables"][key]


def row(report, key, **match):
    rows = [r for r in table(report, key)["rows"] if all(r.get(k) == v for k, v in match.items())]
    assert len(rows) == 1, (key, match, rows)
    return rows[0]


def test_every_table_and_plot_is_built(report):
    out, result = report
    assert list(result["json"]["tables"]) == ALL_TABLES
    for name in ("report.md", "report.json", "main.png", "identity.png", "memory.png", "difficulty.png",
                 "mechanisms.png", "dataset.png"):
        assert (out / name).is_file(), name
        if name.endswith(".png"):
            assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "Tables left out" not in md
    assert json.loads((out / "report.json").read_text())["tables"]["main"]["runs"] == ["none", "same-user"]
    cfg_hash = result["json"]["runs"][0]["config_hash"]
    assert f"Runs: `none` (scripted, none, heldout, dataset {V}, config {cfg_hash}); `same-user` (" in md
    assert "![Main results" in md


def test_main_table_values_and_paired_deltas(runs, report):
    none, su = typed_records(runs["none"]), typed_records(runs["same-user"])
    r_none = row(report, "main", condition="none")
    r_su = row(report, "main", condition="same-user")
    assert r_none["n"] == 5 and r_su["n"] == 5
    assert r_su["model"] == "scripted"       # the blank control's run of the same model is no clash
    for key, fn in (("ES", es), ("FT-ES", ft_es), ("TTC", ttc)):
        assert r_none[key] == pytest.approx(fn(none)) and r_su[key] == pytest.approx(fn(su))
    assert r_su["dES"] == pytest.approx(es(su) - es(none))
    assert r_su["dFT-ES"] == pytest.approx(ft_es(su) - ft_es(none))
    assert r_su["dTTC"] == pytest.approx(ttc(none) - ttc(su))
    assert r_su["dFT-ES_ci"][0] <= r_su["dFT-ES"] <= r_su["dFT-ES_ci"][1] and 0 <= r_su["dFT-ES_p"] <= 1
    assert "dES" not in r_none


def test_identity_memory_and_their_pairs(report):
    assert [r["condition"] for r in table(report, "identity")["rows"]] == [
        "none", "shuffled", "conflicting", "same-user", "same-user vs shuffled", "same-user vs conflicting"]
    gate = row(report, "memory", condition="gate")
    su = row(report, "memory", condition="same-user")
    assert gate["FT-ES"] == pytest.approx(gate["ES"]) and gate["TTC"] == pytest.approx(1.0)
    assert gate["dFT-ES"] == pytest.approx(gate["FT-ES"] - su["FT-ES"])
    assert row(report, "memory", condition="mem0")["dES"] == 0.0


def test_difficulty_mechanisms_and_item_kinds(runs, capa_data, report):
    labels = json.loads(runs["labels"].read_text())
    diff_rows = table(report, "difficulty")["rows"]
    assert {r["difficulty"]: r["n"] for r in diff_rows} == {k: v for k, v in labels["counts"].items() if v}
    assert "from none (scripted, none, config" in table(report, "difficulty")["caption"]
    mech = [r for r in table(report, "mechanisms")["rows"] if r["condition"] == "none"]
    assert sum(r["n"] for r in mech) == 10 and "counted for both" in table(report, "mechanisms")["caption"]
    held = [s for s in capa_data.heldout.values() if s.cell_id in CELLS]
    share = sum(all(h.resolvable_from_history for h in s.hidden_items) for s in held) / len(held)
    oracle = row(report, "item_kind", condition="same-user", group="oracle bound (these sessions)")
    assert oracle["FT-ES"] == pytest.approx(share)
    full = row(report, "item_kind", condition="same-user", group="fully resolvable from history")
    assert full["FT-ES"] == 1.0          # the policy submits at once when history resolves everything
    whole = dataset_stats([*capa_data.history.values(), *capa_data.heldout.values()])["oracle_ft_es"]
    assert f"{100 * whole:.1f}%" in table(report, "item_kind")["caption"]


def test_split_trials_and_blank(runs, report):
    split = table(report, "split")["rows"][0]
    hist = typed_records(runs["none-history"])
    assert (split["n_history"], split["n_heldout"], split["cells"]) == (5, 5, 1)
    assert split["ES_history"] == pytest.approx(es(hist))
    assert split["dES"] == pytest.approx(split["ES_heldout"] - split["ES_history"])
    trial = row(report, "trials", condition="same-user")
    assert trial["trials"] == 2 and trial["pass^1"] >= trial["pass^2"]
    assert set(row(report, "trials", condition="gate")) >= {"ES_sd", "pass^2"}
    blank = table(report, "blank")["rows"][0]
    assert (blank["n"], blank["ES"], blank["FT-ES"], blank["TTC"]) == (2, 1.0, 0.0, 2.0)


def test_history_split_runs_history_sessions(runs, capa_data):
    recs = records(runs["none-history"])
    assert {r["session_id"] for r in recs} == {s.session_id for s in capa_data.history.values() if s.cell_id in CELLS}
    assert {r["role"] for r in recs} <= {"learn", "reuse"}


def test_eval_records_the_difficulty_source(runs, capa_data, tmp_path):
    labels = json.loads(runs["labels"].read_text())
    out = tmp_path / "su"
    summary = run_eval(EvalConfig(model="scripted", condition="same-user", cells=CELLS), out,
                       engine=policy(capa_data, "same-user"), progress=False, data=capa_data, difficulty=labels)
    assert json.loads((out / "config.json").read_text())["difficulty"]["source"] == labels["source"]
    assert summary["difficulty_source"]["run"] == "none"
    assert sum(b["sessions"] for b in summary["per_difficulty"].values()) == 5
    md = (out / "summary.md").read_text()
    assert "Difficulty labels from run none (scripted, none, config" in md and "## Per difficulty label" in md
    bad = {**labels, "source": {**labels["source"], "dataset_manifest_sha256": "0" * 64}}
    with pytest.raises(CapaError, match="difficulty labels from run 'none' were made on dataset"):
        run_eval(EvalConfig(model="scripted", condition="same-user", cells=CELLS), tmp_path / "x",
                 engine=policy(capa_data, "same-user"), progress=False, data=capa_data, difficulty=bad)


def test_refuses_runs_of_different_dataset_versions(tmp_path):
    a = write_run(tmp_path / "old", "none", [record("S1", 1)], dataset=("0.1.0", "1" * 64))
    b = write_run(tmp_path / "new", "same-user", [record("S1", 1)])
    with pytest.raises(CapaError, match=r"different dataset versions: dataset 0\.1\.0 .*old; dataset 0\.2\.0 .*new"):
        build_report([a, b], progress=False)


def test_refuses_to_pair_different_session_sets(tmp_path):
    a = write_run(tmp_path / "none", "none", [record("S1", 1), record("S2", 2)])
    b = write_run(tmp_path / "su", "same-user", [record("S1", 1), record("S3", 1)])
    with pytest.raises(CapaError, match=r"refusing to pair runs none .* and su .*only in none: \['S2'\]; only in su: \['S3'\]"):
        build_report([a, b], progress=False)


def test_refuses_two_runs_in_one_slot_and_foreign_labels(tmp_path, runs):
    a = write_run(tmp_path / "a", "none", [record("S1", 1)])
    b = write_run(tmp_path / "b", "none", [record("S1", 2)])
    with pytest.raises(CapaError, match="runs a, b are the same model setting"):
        build_report([a, b], progress=False)
    with pytest.raises(CapaError, match=f"difficulty labels from run 'none' were made on dataset {V}"):
        build_report([a], difficulty=runs["labels"], progress=False)
    # another budget is another model setting: no clash, and the two are told apart
    c = write_run(tmp_path / "c", "none", [record("S1", 2)], max_tokens=100)
    models = [r["model"] for r in build_report([a, c], progress=False)["json"]["tables"]["mechanisms"]["rows"]]
    assert len(set(models)) == 2 and all(m.startswith("scripted #") for m in models)


def test_a_partial_report_says_what_is_left_out(tmp_path):
    a = write_run(tmp_path / "only", "same-user", [record("S1", 1), record("S2", None)])
    md = build_report([a], progress=False)["markdown"]
    assert "- main: needs a `none` and a `same-user` run" in md and "## Per ambiguity mechanism" in md


def test_cli_report_names_a_missing_run(tmp_path, capsys, runs):
    assert main(["report", str(runs["none"]), str(tmp_path / "gone"), "--no-progress"]) == 2
    assert f"{tmp_path / 'gone'}: no such run folder" in capsys.readouterr().err
    out = tmp_path / "rep"
    assert main(["report", str(runs["none"]), str(runs["same-user"]), "--out", str(out), "--no-progress"]) == 0
    assert (out / "main.png").is_file() and "## Main results" in capsys.readouterr().out
