"""`capa eval` checks its dataset against the build's manifest, and config.json records how the run
was made (times, command line, git commit, versions) outside the config that decides resume."""

import hashlib
import json
import platform
import shutil
import subprocess
import sys
from datetime import datetime
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capa_hf.dataset.integrity import check_manifest
from capa_hf.evaluation.provenance import engine_libraries, git_state
from capa_hf.paths import DEFAULT_DATASET_DIR, REPO_DIR
from tests.cli_run import one_line_error, run_cli

HELDOUT = "data/heldout-00000-of-00001.parquet"


@pytest.fixture
def edited(tmp_path):
    """A copy of the committed dataset with one held-out request changed."""
    copy = tmp_path / "capa-edited"
    shutil.copytree(DEFAULT_DATASET_DIR, copy)
    path = copy / HELDOUT
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["initial_request"] += " Please be quick about it."
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path, compression="zstd")
    return copy


def eval_argv(out, *extra):
    return ["eval", "--model", "reference:asker", "--limit", "1", "--no-progress", "--out", str(out), *extra]


def test_an_edited_dataset_is_refused_in_one_line_naming_the_file(edited, tmp_path, capsys):
    out = tmp_path / "run"
    err = one_line_error(eval_argv(out, "--dataset", str(edited)), capsys, f"{edited}: {HELDOUT} differs")
    assert "--allow-modified" in err and not out.exists()      # refused before any run folder is made


def test_allow_modified_runs_and_records_the_hash_it_computed(edited, tmp_path, capsys):
    code, _, err = run_cli(eval_argv(tmp_path / "edited-run", "--dataset", str(edited), "--allow-modified"), capsys)
    assert code == 0, err
    code, _, err = run_cli(eval_argv(tmp_path / "clean-run"), capsys)
    assert code == 0, err
    modified = json.loads((tmp_path / "edited-run" / "config.json").read_text())
    clean = json.loads((tmp_path / "clean-run" / "config.json").read_text())
    manifest_bytes = (DEFAULT_DATASET_DIR / "capa_manifest.json").read_bytes()
    # the untouched build: the hash of its manifest file, as runs and labels always recorded it
    assert clean["dataset_manifest_sha256"] == hashlib.sha256(manifest_bytes).hexdigest()
    assert clean["dataset_manifest_matches"] is True and "dataset_modified_files" not in clean
    # the edited copy carries the same manifest file, but its recorded hash is of what it holds
    assert modified["dataset_manifest_sha256"] != clean["dataset_manifest_sha256"]
    assert modified["dataset_manifest_written_sha256"] == clean["dataset_manifest_sha256"]
    assert modified["dataset_manifest_matches"] is False and modified["dataset_modified_files"] == [HELDOUT]


def test_an_edited_copy_is_read_as_edited_even_under_the_committed_builds_name(edited, tmp_path, capsys):
    # `datasets` caches a local folder by its name and paths: a copy named "capa" must not be served
    # the committed build's cached tables
    from capa_hf.dataset.load import load_capa

    load_capa(DEFAULT_DATASET_DIR)                       # the committed build is in the cache
    same_name = tmp_path / "elsewhere" / DEFAULT_DATASET_DIR.name
    shutil.copytree(edited, same_name)
    first = pq.read_table(same_name / HELDOUT).to_pylist()[0]
    assert load_capa(same_name).heldout[first["session_id"]].initial_request.endswith("Please be quick about it.")
    out = tmp_path / "run"
    code, _, err = run_cli(eval_argv(out, "--dataset", str(same_name), "--allow-modified", "--cells", first["cell_id"]),
                           capsys)
    assert code == 0, err
    played = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert played[0]["session_id"] == first["session_id"]
    assert played[0]["turns"][0]["content"].endswith("Please be quick about it.")


def test_check_manifest_names_missing_and_edited_files(edited):
    (edited / "cells" / "train-00000-of-00001.parquet").unlink()
    check = check_manifest(edited)
    assert not check.matches and check.differing == (HELDOUT,)
    assert check.missing == ("cells/train-00000-of-00001.parquet",)
    assert "missing" in check.problem_line() and HELDOUT in check.problem_line()
    assert check_manifest(DEFAULT_DATASET_DIR).matches


def test_config_records_times_command_line_commit_and_versions(tmp_path, capsys, monkeypatch):
    import datasets
    import huggingface_hub

    out = tmp_path / "run"
    argv = ["capa", *eval_argv(out)]
    monkeypatch.setattr(sys, "argv", argv)
    code, _, err = run_cli(argv[1:], capsys)
    assert code == 0, err
    prov = json.loads((out / "config.json").read_text())["provenance"]
    assert prov["argv"] == argv and prov["ended"] == "finished"
    started, ended = (datetime.fromisoformat(prov[k]) for k in ("started_at", "ended_at"))
    assert started <= ended and started.tzinfo is not None
    versions = prov["versions"]
    assert versions["python"] == platform.python_version()
    assert versions["datasets"] == datasets.__version__ and versions["huggingface_hub"] == huggingface_hub.__version__
    assert "capa" in versions and "torch" in versions
    if (REPO_DIR / ".git").exists():
        head = subprocess.run(["git", "-C", str(REPO_DIR), "rev-parse", "HEAD"], capture_output=True,
                              text=True).stdout.strip()
        assert prov["git"]["commit"] == head and isinstance(prov["git"]["dirty"], bool)
    else:
        assert prov["git"] is None


def test_git_state_outside_a_checkout_is_none(tmp_path):
    assert git_state(tmp_path) is None


def test_engine_library_versions_follow_the_engine_spec(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(__version__="9.9.9"))
    libs = engine_libraries(["vllm:Qwen/Qwen3-8B", "llm:vllm:Qwen/Qwen3-8B", "reference:asker", None])
    assert libs == {"vllm": "9.9.9"}
    import httpx

    assert engine_libraries(["openai:m@http://localhost:1"]) == {"httpx": httpx.__version__}
    assert set(engine_libraries(["llamacpp"])) == {"llama_cpp"}


def test_provenance_takes_no_part_in_resume(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_cli(eval_argv(out), capsys)[0] == 0
    cfg_path = out / "config.json"
    cfg = json.loads(cfg_path.read_text())
    first = cfg["provenance"]
    # another machine, another day: other versions, times and commit, and the same run
    cfg["provenance"] = {**first, "versions": {"python": "0.0"}, "git": {"commit": "0" * 40, "dirty": True},
                         "started_at": "2001-01-01T00:00:00+00:00"}
    cfg_path.write_text(json.dumps(cfg))
    code, _, err = run_cli(eval_argv(out), capsys)
    assert code == 0, err
    again = json.loads(cfg_path.read_text())
    assert json.loads((out / "summary.json").read_text())["resumed"] == 1
    assert again["earlier_provenance"] == [cfg["provenance"]]
    assert again["provenance"]["versions"]["python"] == platform.python_version()
