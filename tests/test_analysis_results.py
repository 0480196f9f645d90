"""sessions_df and turns_df over run folders, and the errors for missing or half-written runs."""

import json

import pandas as pd
import pytest

from capa_hf.analysis.results import load_run
from capa_hf.errors import CapaError
from capa_hf.results import sessions_df, turns_df
from tests.run_fakes import record, write_run


def test_sessions_df_one_row_per_run_session_trial(tmp_path):
    a = write_run(tmp_path / "a", "none", [record("S1", 1), record("S2", None, resolvable=False, kinds=("task",))])
    b = write_run(tmp_path / "b", "same-user", [record("S1", 3, trial=0), record("S1", 1, trial=1),
                                                record("S2", 2, trial=0), record("S2", 2, trial=1)], samples=2)
    df = sessions_df([a, b])
    assert len(df) == 6 and list(df.groupby("run").size()) == [2, 4]
    s2 = df[(df["run"] == "a") & (df["session_id"] == "S2")].iloc[0]
    assert (s2["solved"], s2["first_turn"], s2["ttc"]) == (False, False, 8.0) and pd.isna(s2["success_turn"])
    assert s2["item_kind"] == "task items only" and not s2["fully_resolvable"]
    assert s2["mechanisms"] == ["habitual_omission", "implicit_constraint"]
    assert (s2["prompt_tokens"], s2["completion_tokens"], s2["wall_s"]) == (80, 40, 0.5)
    s1 = df[(df["run"] == "b") & (df["session_id"] == "S1") & (df["trial"] == 0)].iloc[0]
    assert (s1["solved"], s1["ttc"], s1["submissions"], s1["condition"]) == (True, 3.0, 3, "same-user")
    assert s1["dataset_version"] == "0.2.0" and len(s1["config_hash"]) == 12
    # the same model setting, whatever the condition and samples
    assert df["setting"].nunique() == 1


def test_incomplete_records_are_left_out_unless_asked(tmp_path):
    run = write_run(tmp_path / "r", "none", [record("S1", 1), record("S2", None, incomplete=True)], n_targets=1)
    assert sessions_df(run)["session_id"].tolist() == ["S1"]
    full = sessions_df(run, include_incomplete=True)
    assert full.set_index("session_id").loc["S2", "incomplete"]


def test_turns_df_one_row_per_assistant_turn(tmp_path):
    run = write_run(tmp_path / "r", "none", [record("S1", 3)])
    t = turns_df(run)
    assert t["turn"].tolist() == [1, 2, 3]
    assert t["status"].tolist() == ["failed", "failed", "passed"]
    assert t["failure_type"].tolist()[:2] == ["AssertionError", "AssertionError"] and pd.isna(t["failure_type"][2])
    assert t["reply"].tolist() == ["reply 1", "reply 2", "reply 3"]


def test_missing_and_half_written_runs_are_named(tmp_path):
    with pytest.raises(CapaError, match=f"{tmp_path / 'nope'}: no such run folder"):
        sessions_df(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CapaError, match="empty: not a run folder"):
        sessions_df(tmp_path / "empty")
    half = write_run(tmp_path / "half", "none", [record("S1", 1), record("S2", None, incomplete=True)], n_targets=3)
    with pytest.raises(CapaError, match=r"half: half-written run: 1 of 3 .*1 incomplete, 1 not started"):
        sessions_df(half)
    assert len(sessions_df(half, allow_partial=True)) == 1
    (half / "sessions.jsonl").unlink()
    with pytest.raises(CapaError, match="no sessions.jsonl"):
        load_run(half)
    (tmp_path / "badcfg").mkdir()
    (tmp_path / "badcfg" / "config.json").write_text(json.dumps({"model": "x"}))
    with pytest.raises(CapaError, match="has no 'run' block"):
        load_run(tmp_path / "badcfg")


def test_torn_last_line_counts_as_not_finished(tmp_path):
    run = write_run(tmp_path / "r", "none", [record("S1", 1), record("S2", 1)])
    text = (run / "sessions.jsonl").read_text()
    (run / "sessions.jsonl").write_text(text[: len(text) - 40])
    with pytest.raises(CapaError, match="1 of 2"):
        load_run(run)


def test_same_folder_names_get_their_parent(tmp_path):
    a = write_run(tmp_path / "m1" / "none", "none", [record("S1", 1)])
    b = write_run(tmp_path / "m2" / "none", "none", [record("S1", 1)], model="other")
    assert sorted(sessions_df([a, b])["run"].unique()) == ["m1/none", "m2/none"]
