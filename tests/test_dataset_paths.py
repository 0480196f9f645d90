"""`--dataset`: a value that looks like a local path and does not exist is refused at once as a
missing folder (the Hub is never asked), and a dataset folder with a parquet file that cannot be
read is refused in one line naming that file."""

from __future__ import annotations

import shutil

import pytest

from capa_hf.dataset import load as load_module
from capa_hf.dataset.load import load_capa
from capa_hf.dataset.locate import looks_local, unreadable_parquet
from capa_hf.errors import CapaError
from capa_hf.paths import DEFAULT_DATASET_DIR
from tests.cli_run import one_line_error

EVAL = ["eval", "--model", "reference:asker", "--cells", "C01", "--limit", "1", "--no-progress"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    (tmp_path / "dist").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("value, local", [
    ("dist/capa2", True),             # its parent exists: a mistyped folder, not a Hub id
    ("./capa", True), ("../capa", True), ("/no/such/capa", True), ("~/capa", True),
    ("a/b/c", True),                  # no Hub id has two slashes
    ("org/capa", False),              # namespace/name whose parent is no folder here
    ("capa", False),
])
def test_what_looks_like_a_local_path(value, local, in_tmp):
    assert looks_local(value) is local


@pytest.fixture
def no_hub(monkeypatch):
    """Fail the test if anything asks the Hub or `datasets` to load."""
    import datasets
    import huggingface_hub

    def refuse(*a, **k):
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr(datasets, "load_dataset", refuse)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)


@pytest.mark.parametrize("value", ["dist/capa2", "./capa2", "a/b/c"])
def test_a_missing_local_folder_is_refused_before_the_hub(value, in_tmp, no_hub):
    with pytest.raises(CapaError, match=rf"^dataset '{value}': no such local folder \("):
        load_capa(value)


def test_eval_names_the_missing_folder_in_one_line(tmp_path, no_hub, capsys):
    missing = tmp_path / "dist" / "capa2"
    one_line_error(EVAL + ["--out", str(tmp_path / "r"), "--dataset", str(missing)], capsys,
                   f"dataset '{missing}': no such local folder")
    assert not (tmp_path / "r").exists()


@pytest.fixture
def copy(tmp_path):
    out = tmp_path / "capa"
    shutil.copytree(DEFAULT_DATASET_DIR, out)
    return out


def test_a_truncated_parquet_file_is_named_in_one_line(copy, tmp_path, capsys):
    bad = copy / "variants" / "train-00000-of-00001.parquet"
    bad.write_bytes(bad.read_bytes()[:4000])
    # the manifest check names it first ...
    err = one_line_error(EVAL + ["--out", str(tmp_path / "r"), "--dataset", str(copy)], capsys,
                         "variants/train-00000-of-00001.parquet differs from its capa_manifest.json")
    assert "--allow-modified" in err and not (tmp_path / "r").exists()
    # ... and a run that accepts a modified dataset is told which file cannot be read
    err = one_line_error(EVAL + ["--out", str(tmp_path / "r"), "--dataset", str(copy), "--allow-modified"], capsys,
                         f"{bad}: unreadable parquet file (")
    assert "rebuild the dataset" in err


def test_a_corrupt_page_is_named_after_the_load_fails(copy):
    bad = copy / "cells" / "train-00000-of-00001.parquet"
    raw = bytearray(bad.read_bytes())
    raw[4:64] = b"\xab" * 60              # the first page header; the footer still reads
    bad.write_bytes(bytes(raw))
    assert unreadable_parquet(copy, whole=False) is None
    assert unreadable_parquet(copy)[0] == bad
    with pytest.raises(CapaError) as exc:
        load_capa(copy)
    msg = str(exc.value)
    assert msg.startswith(f"{bad}: unreadable parquet file (") and "\n" not in msg


def test_a_good_folder_still_loads():
    assert load_module.load_capa(DEFAULT_DATASET_DIR).heldout
