"""The reference policies: a first run in seconds, with no model."""

from __future__ import annotations

import json

import pytest

from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.run import run_eval
from tests.cli_run import one_line_error, run_cli


def _run(tmp_path, capa_data, model, cells=("C01",)):
    return run_eval(EvalConfig(model=model, condition="none", cells=cells), tmp_path / model.replace(":", "-"),
                    data=capa_data, progress=False)


def test_the_oracle_solves_every_session_at_turn_one(tmp_path, capa_data):
    s = _run(tmp_path, capa_data, "reference:oracle", cells=("C01", "C02"))
    assert s["n_sessions"] == 10 and s["overall"]["ES"]["value"] == 1.0 and s["overall"]["FT-ES"]["value"] == 1.0


def test_the_asker_asks_one_question_per_hidden_item_then_solves(tmp_path, capa_data):
    run = tmp_path / "asker"
    run_eval(EvalConfig(model="reference", condition="none", cells=("C04",)), run, data=capa_data, progress=False)
    for line in (run / "sessions.jsonl").read_text().splitlines():
        rec = json.loads(line)
        n = len(capa_data.heldout[rec["session_id"]].hidden_items)
        assert rec["turn_kinds"] == ["clarification"] * n + ["submission"] and rec["success_turn"] == n + 1
        assert sorted(rec["revealed"]) == sorted(h.id for h in capa_data.heldout[rec["session_id"]].hidden_items)
    assert json.loads((run / "config.json").read_text())["engine"] == {"engine": "reference",
                                                                       "model": "reference:asker"}


def test_humanevals_own_solution_fails_where_the_users_conventions_differ(tmp_path, capa_data):
    s = _run(tmp_path, capa_data, "reference:humaneval")
    assert s["n_sessions"] == 5 and s["overall"]["ES"]["value"] < 1.0


@pytest.mark.parametrize("argv, expected", [
    (["--model", "reference:guesser"], "unknown reference policy 'guesser'; expected one of reference:asker"),
    (["--model", "reference:oracle", "--engine-arg", "n_ctx=4"], "a reference policy takes no --engine-arg"),
    (["--model", "scripted"], "try --model reference:asker"),
])
def test_bad_reference_specs_are_one_line(argv, expected, tmp_path, capsys):
    one_line_error(["eval", *argv, "--cells", "C01", "--limit", "1", "--no-progress",
                    "--out", str(tmp_path / "r")], capsys, expected)


def test_the_first_command_of_the_readme(tmp_path, capsys):
    code, out, _ = run_cli(["eval", "--model", "reference:asker", "--cells", "C01", "--no-progress",
                            "--out", str(tmp_path / "check")], capsys)
    assert code == 0 and "| overall | 5 | 100.0 [100.0, 100.0] |" in out.replace("**", "")
