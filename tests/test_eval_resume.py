"""A rerun into a run folder follows what the user meant: a folder with no finished session takes
the new config, --limit may grow, options equal to their defaults compare equal, --overwrite starts
over; any other change is refused in one line naming the keys."""

import json

import pytest

import runners.driver
from capa_hf.evaluation import runner
from capa_hf.evaluation.resume import differing_keys, limit_grows
from capa_hf.paths import DEFAULT_DATASET_DIR, REPO_DIR
from tests.cli_run import one_line_error, run_cli


def run(out, capsys, *flags):
    code, _, err = run_cli(["eval", "--model", "reference:asker", "--no-progress", "--out", str(out), *flags], capsys)
    assert code == 0, err
    return json.loads((out / "summary.json").read_text()), err


def lines(out):
    return (out / "sessions.jsonl").read_text().splitlines()


def recorded(out):
    return json.loads((out / "config.json").read_text())["run"]


def test_a_folder_with_no_finished_session_takes_the_new_config(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"

    def crash(episodes, **kw):
        raise KeyboardInterrupt          # a start that dies before any session ends

    monkeypatch.setattr(runner, "run_episodes", crash)
    code, _, err = run_cli(["eval", "--model", "reference:asker", "--limit", "1", "--max-turns", "3",
                           "--no-progress", "--out", str(out)], capsys)
    assert code == 130 and recorded(out)["max_turns"] == 3
    assert "interrupted before any session finished" in err
    monkeypatch.setattr(runner, "run_episodes", runners.driver.run_episodes)
    summary, _ = run(out, capsys, "--limit", "1")          # the corrected command
    assert recorded(out)["max_turns"] == 8 and summary["n_sessions"] == 1 and summary["resumed"] == 0


def test_only_engine_failures_count_as_nothing_finished(tmp_path, capsys):
    out = tmp_path / "run"
    run(out, capsys, "--limit", "1", "--seed", "3")
    rec = json.loads(lines(out)[0])
    stale = {**rec, "incomplete": True, "error": {"error": "HTTP 500"}, "submissions": [], "solved": False}
    (out / "sessions.jsonl").write_text(json.dumps(stale) + "\n")
    summary, _ = run(out, capsys, "--limit", "1")
    assert recorded(out)["seed"] == 0 and summary["n_incomplete"] == 0 and len(lines(out)) == 1
    assert not json.loads(lines(out)[0]).get("incomplete")


def test_a_larger_limit_keeps_the_finished_sessions_and_runs_the_new_ones(tmp_path, capsys):
    out = tmp_path / "run"
    run(out, capsys, "--limit", "1")
    first = lines(out)
    summary, _ = run(out, capsys, "--limit", "3")
    assert summary["resumed"] == 1 and summary["n_sessions"] == 3
    assert lines(out)[0] == first[0] and len(lines(out)) == 3       # the finished line kept as it was
    assert recorded(out)["limit"] == 3


def test_a_smaller_limit_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    run(out, capsys, "--limit", "2")
    one_line_error(["eval", "--model", "reference:asker", "--limit", "1", "--no-progress", "--out", str(out)],
                   capsys, "limit (was 2, now 1: a limit may only grow)")
    assert recorded(out)["limit"] == 2 and len(lines(out)) == 2


def test_another_option_is_refused_naming_every_differing_key(tmp_path, capsys):
    out = tmp_path / "run"
    run(out, capsys, "--limit", "1")
    err = one_line_error(["eval", "--model", "reference:asker", "--limit", "2", "--max-turns", "4", "--seed", "2",
                          "--no-progress", "--out", str(out)], capsys, "differs in: max_turns, seed)")
    assert "--overwrite" in err and recorded(out)["limit"] == 1


def test_options_equal_to_their_defaults_compare_equal(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    run(out, capsys, "--limit", "1", "--cells", "C02", "C01")
    monkeypatch.chdir(REPO_DIR)
    for dataset in ("dist/capa", str(DEFAULT_DATASET_DIR)):
        summary, _ = run(out, capsys, "--limit", "1", "--cells", "C01", "C02", "--dataset", dataset)
        assert summary["resumed"] == 1 and len(lines(out)) == 1


def test_overwrite_says_what_it_deletes_and_starts_over(tmp_path, capsys):
    out = tmp_path / "run"
    run(out, capsys, "--limit", "2")
    summary, err = run(out, capsys, "--limit", "1", "--seed", "5", "--overwrite")
    assert f"--overwrite: deleting the run in {out} (" in err and "sessions.jsonl" in err
    assert summary["resumed"] == 0 and len(lines(out)) == 1 and recorded(out)["seed"] == 5
    assert "earlier_provenance" not in json.loads((out / "config.json").read_text())


def test_overwrite_never_deletes_a_folder_that_is_not_a_run(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me\n")
    one_line_error(["eval", "--model", "reference:asker", "--limit", "1", "--no-progress", "--overwrite",
                    "--out", str(folder)], capsys, f"--overwrite {folder}: not a run folder")
    assert (folder / "notes.txt").read_text() == "keep me\n"


@pytest.mark.parametrize("old, new, grows", [(1, 3, True), (3, 3, True), (3, None, True), (3, 2, False),
                                             (None, 5, False), (None, None, True)])
def test_limit_grows(old, new, grows):
    assert limit_grows(old, new) is grows


def test_normalised_keys():
    base = {"model": "m", "dataset": None, "cells": None, "limit": 1}
    assert differing_keys(base, {**base, "dataset": str(DEFAULT_DATASET_DIR), "cells": []}) == []
    assert differing_keys(base, {**base, "dataset": "org/other", "cells": ["C01"]}) == ["cells", "dataset"]


def test_the_same_options_on_other_data_are_refused(tmp_path, capsys):
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "capa"
    shutil.copytree(DEFAULT_DATASET_DIR, copy)
    out = tmp_path / "run"
    run(out, capsys, "--limit", "1", "--dataset", str(copy))
    path = copy / "data" / "heldout-00000-of-00001.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[1]["initial_request"] += " Thanks."
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path, compression="zstd")
    one_line_error(["eval", "--model", "reference:asker", "--limit", "2", "--dataset", str(copy), "--allow-modified",
                    "--no-progress", "--out", str(out)], capsys, "differs in: dataset_manifest_sha256)")
