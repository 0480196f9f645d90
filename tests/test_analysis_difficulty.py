"""Difficulty labels: the boundaries, the labels file, and its use by eval and report."""

import json

import pandas as pd
import pytest

from capa_hf.analysis.difficulty import labels_from_run
from capa_hf.analysis.results import sessions_df
from capa_hf.cli import main
from capa_hf.errors import CapaError
from capa_hf.evaluation.difficulty_labels import check_labels_match, difficulty_label, read_labels, write_labels
from tests.run_fakes import DATASET, record, write_run


@pytest.mark.parametrize("turns,label", [(1, "simple"), (2, "simple"), (3, "moderate"), (4, "moderate"),
                                         (5, "complex"), (8, "complex"), (None, "complex"), (2.5, "moderate"),
                                         (4.5, "complex")])
def test_boundaries(turns, label):
    assert difficulty_label(turns) == label


def test_labels_from_a_none_run(tmp_path):
    recs = [record("S1", 2), record("S2", 3), record("S3", 5), record("S4", None), record("S5", 1)]
    run = write_run(tmp_path / "ref-none", "none", recs)
    labels = labels_from_run(run)
    assert labels["labels"] == {"S1": "simple", "S2": "moderate", "S3": "complex", "S4": "complex", "S5": "simple"}
    assert labels["counts"] == {"simple": 2, "moderate": 1, "complex": 2}
    src = labels["source"]
    assert src["run"] == "ref-none" and src["model"] == "scripted" and len(src["config_hash"]) == 64
    assert (src["dataset_version"], src["dataset_manifest_sha256"]) == DATASET
    path = write_labels(labels, tmp_path / "labels")
    assert read_labels(path) == labels and read_labels(tmp_path / "labels") == labels


def test_trials_are_averaged_before_labelling(tmp_path):
    recs = [record("S1", 1, trial=0), record("S1", 4, trial=1), record("S2", 2, trial=0), record("S2", None, trial=1)]
    labels = labels_from_run(write_run(tmp_path / "r", "none", recs, samples=2))
    assert labels["turns"] == {"S1": 2.5, "S2": 5.0}
    assert labels["labels"] == {"S1": "moderate", "S2": "complex"}


def test_refuses_a_history_condition_and_bad_files(tmp_path):
    run = write_run(tmp_path / "su", "same-user", [record("S1", 1)])
    with pytest.raises(CapaError, match="no-history run"):
        labels_from_run(run)
    with pytest.raises(CapaError, match="no such labels file"):
        read_labels(tmp_path / "nothing.json")
    (tmp_path / "bad.json").write_text(json.dumps({"labels": {}}))
    with pytest.raises(CapaError, match="not a difficulty labels file"):
        read_labels(tmp_path / "bad.json")


def test_labels_of_another_dataset_are_refused(tmp_path):
    labels = labels_from_run(write_run(tmp_path / "r", "none", [record("S1", 1)]))
    with pytest.raises(CapaError, match="made on dataset 0.2.0.*uses 0.3.0"):
        check_labels_match(labels, "0.3.0", "b" * 64, "run x")


def test_sessions_df_takes_the_labels_and_names_their_source(tmp_path):
    labels = labels_from_run(write_run(tmp_path / "ref", "none", [record("S1", 1), record("S2", 7)]))
    su = write_run(tmp_path / "su", "same-user", [record("S1", 1), record("S2", 2), record("S3", 1)])
    df = sessions_df(su, difficulty=labels).set_index("session_id")
    assert df.loc["S1", "difficulty"] == "simple" and df.loc["S2", "difficulty"] == "complex"
    assert pd.isna(df.loc["S3", "difficulty"])
    assert df["difficulty_source"].unique().tolist() == [f"ref (scripted, none, config {labels['source']['config_hash'][:12]})"]
    # without labels, a run evaluated with --difficulty carries its own in config.json
    cfg = json.loads((su / "config.json").read_text())
    cfg["difficulty"] = labels
    (su / "config.json").write_text(json.dumps(cfg))
    assert sessions_df(su).set_index("session_id").loc["S2", "difficulty"] == "complex"


def test_cli_label_difficulty(tmp_path, capsys):
    run = write_run(tmp_path / "ref", "none", [record("S1", 1), record("S2", 3), record("S3", None)])
    assert main(["label-difficulty", str(run), "--out", str(tmp_path / "lab")]) == 0
    out = capsys.readouterr().out
    assert "1 simple (33.3%), 1 moderate (33.3%), 1 complex (33.3%)" in out
    assert read_labels(tmp_path / "lab" / "difficulty.json")["labels"]["S3"] == "complex"


def test_unsolved_is_complex_even_when_the_run_had_a_smaller_turn_budget(tmp_path):
    """A run cut at 3 turns: its unsolved sessions count as the full 8 turns, not as 3 (moderate)."""
    recs = [record("S1", 3), record("S2", None)]
    run = write_run(tmp_path / "short", "none", recs, max_turns=3)
    labels = labels_from_run(run)
    assert labels["source"]["max_turns"] == 3
    assert labels["labels"] == {"S1": "moderate", "S2": "complex"}
    assert labels["turns"]["S2"] == 8.0
