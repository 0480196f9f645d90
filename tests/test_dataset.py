"""The built dataset: loads with `datasets`, keeps every balance constraint, rebuilds identically,
and `capa validate` refuses corrupt or hand-edited folders."""

import json
import shutil
from collections import Counter
from itertools import combinations

import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

from capa_hf.dataset.build import build_dataset
from capa_hf.dataset.validate import validate_folder
from capa_hf.paths import DEFAULT_DATASET_DIR


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("build") / "capa"
    info = build_dataset(out, seed=0, progress=False)
    return out, info


def test_committed_dataset_loads_with_datasets_and_is_balanced():
    ds = load_dataset(str(DEFAULT_DATASET_DIR))
    assert set(ds) == {"history", "heldout"}
    assert ds["history"].num_rows == 300 and ds["heldout"].num_rows == 300
    rows = list(ds["history"]) + list(ds["heldout"])
    cells = {}
    for r in rows:
        cells.setdefault(r["cell_id"], []).append(r)
    assert len(cells) == 60
    first = {c: rs[0] for c, rs in cells.items()}
    assert set(Counter(r["persona_id"] for r in first.values()).values()) == {6}
    pairs = Counter(tuple(sorted(r["mechanisms"])) for r in first.values())
    mechs = sorted({m for p in pairs for m in p})
    assert len(mechs) == 6 and set(pairs) == set(combinations(mechs, 2)) and set(pairs.values()) == {4}
    for rs in cells.values():
        assert sorted(r["position"] for r in rs) == list(range(1, 11))
        assert len({r["task_id"] for r in rs}) == 10
        assert {r["split"] for r in rs if r["position"] <= 5} == {"history"}
        assert len({r["persona_id"] for r in rs}) == 1 and len({tuple(r["mechanisms"]) for r in rs}) == 1
    assert set(Counter(r["task_id"] for r in rows).values()) <= {3, 4}
    assert len({r["task_id"] for r in rows}) == 164
    assert all(r["resolved"] for r in ds["history"])
    for r in rows:
        assert r["hidden_items"], r["session_id"]
        assert {h["mechanism"] for h in r["hidden_items"]} == set(r["mechanisms"])
        for h in r["hidden_items"]:
            assert h["clarification"] not in r["initial_request"]
        assert r["generator"]["pipeline_version"] == "0.1.0"


def test_other_configs_load():
    tasks = load_dataset(str(DEFAULT_DATASET_DIR), "tasks", split="train")
    assert tasks.num_rows == 164 and all(2 <= len(t["keypoints"]) <= 8 for t in tasks)
    assert load_dataset(str(DEFAULT_DATASET_DIR), "personas", split="train").num_rows == 10
    assert load_dataset(str(DEFAULT_DATASET_DIR), "mechanisms", split="train").num_rows == 6
    assert load_dataset(str(DEFAULT_DATASET_DIR), "cells", split="train").num_rows == 60


def test_committed_dataset_validates():
    report = validate_folder(DEFAULT_DATASET_DIR)
    assert report.ok, report.summary()


def test_rebuild_is_byte_identical_to_the_committed_build(built):
    out, info = built
    assert info["sessions"] == 600
    for path in sorted(DEFAULT_DATASET_DIR.rglob("*")):
        if path.is_file():
            rel = path.relative_to(DEFAULT_DATASET_DIR)
            assert (out / rel).read_bytes() == path.read_bytes(), f"{rel} differs"


def test_validate_refuses_a_hand_edited_parquet(built, tmp_path):
    out, _ = built
    copy = tmp_path / "capa"
    shutil.copytree(out, copy)
    path = copy / "data" / "heldout-00000-of-00001.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["initial_request"] = "please just write it"
    pq.write_table(table.from_pylist(rows, schema=table.schema), path)
    report = validate_folder(copy)
    assert not report.ok
    assert any("heldout-00000-of-00001.parquet" in e and "manifest" in e for e in report.errors)


def test_validate_refuses_a_corrupt_parquet(built, tmp_path):
    out, _ = built
    copy = tmp_path / "capa"
    shutil.copytree(out, copy)
    path = copy / "data" / "history-00000-of-00001.parquet"
    path.write_bytes(path.read_bytes()[:500])
    report = validate_folder(copy)
    assert any("history-00000-of-00001.parquet" in e and "not a readable parquet" in e for e in report.errors)


def test_validate_refuses_card_sizes_that_disagree(built, tmp_path):
    out, _ = built
    copy = tmp_path / "capa"
    shutil.copytree(out, copy)
    card = copy / "README.md"
    text = card.read_text()
    assert "num_examples: 300" in text
    card.write_text(text.replace("num_examples: 300", "num_examples: 299", 1))
    report = validate_folder(copy)
    assert any("README.md" in e and "299" in e for e in report.errors)


def test_card_has_configs_version_and_license(built):
    out, _ = built
    text = (out / "README.md").read_text()
    assert "configs:" in text and "data/history-00000-of-00001.parquet" in text
    assert "license: mit" in text and "CAPA 0.1.0" in text
    manifest = json.loads((out / "capa_manifest.json").read_text())
    assert manifest["version"] == "0.1.0" and len(manifest["files"]) == 6
