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
from capa_hf.version import PIPELINE_VERSION as V


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
    assert all(r["resolved"] for r in rows)
    for r in rows:
        assert r["hidden_items"], r["session_id"]
        assert {h["mechanism"] for h in r["hidden_items"]} <= set(r["mechanisms"])
        for h in r["hidden_items"]:
            assert h["clarification"] not in r["initial_request"]
        assert r["generator"]["pipeline_version"] == V


def test_heldout_rows_carry_no_trace_and_history_rows_do():
    ds = load_dataset(str(DEFAULT_DATASET_DIR))
    assert all(r["turns"] == [] for r in ds["heldout"])
    assert all(len(r["turns"]) >= 2 and r["turns"][-1]["role"] == "assistant" for r in ds["history"])


def test_heldout_tasks_never_appear_in_history():
    ds = load_dataset(str(DEFAULT_DATASET_DIR))
    assert not {r["task_id"] for r in ds["heldout"]} & {r["task_id"] for r in ds["history"]}


def test_revealed_in_points_only_at_earlier_history_sessions_of_the_same_cell():
    from capa_hf.simulator.reply_lines import answered

    ds = load_dataset(str(DEFAULT_DATASET_DIR))
    rows = {r["session_id"]: r for split in ds.values() for r in split}
    wraps = {p["id"]: p["voice"]["clarification_wraps"]
             for p in load_dataset(str(DEFAULT_DATASET_DIR), "personas", split="train")}
    n = 0
    for r in rows.values():
        for h in r["hidden_items"]:
            assert h["resolvable_from_history"] == bool(h["revealed_in"])
            assert (h["kind"] == "convention") == (h["dimension"] is not None)
            for sid in h["revealed_in"]:
                src = rows[sid]
                n += 1
                assert src["cell_id"] == r["cell_id"] and src["split"] == "history"
                assert src["position"] < r["position"]
                # the source session really states that value: its trace holds the clarification
                # of an item on the same dimension (the persona's lead-in is said once a session,
                # so a later answer may come without it)
                stated = [x for x in src["hidden_items"] if x["dimension"] == h["dimension"]]
                users = [t["content"] for t in src["turns"] if t["role"] == "user"]
                assert stated and any(answered(x["clarification"], u, wraps[src["persona_id"]])
                                      for x in stated for u in users), (sid, h["dimension"])
    assert n > 300


def test_every_heldout_task_exercises_a_dimension_its_cells_history_exercised():
    import json as _json

    variants = {r["variant_id"]: r for r in load_dataset(str(DEFAULT_DATASET_DIR), "variants", split="train")}
    ds = load_dataset(str(DEFAULT_DATASET_DIR))
    shown = {}
    for r in ds["history"]:
        shown.setdefault(r["cell_id"], set()).update(_json.loads(variants[r["variant_id"]]["values"]))
    for r in ds["heldout"]:
        assert set(_json.loads(variants[r["variant_id"]]["values"])) & shown[r["cell_id"]], r["session_id"]


def test_sessions_needing_another_value_fail_canonical_and_pass_the_reference():
    """25 random held-out sessions whose variant differs from HumanEval: HumanEval's canonical
    solution fails the session's tests and the variant's reference passes them."""
    import random

    from sandbox import CheckJob, SandboxPool

    variants = {r["variant_id"]: r for r in load_dataset(str(DEFAULT_DATASET_DIR), "variants", split="train")}
    tasks = {t["task_id"]: t for t in load_dataset(str(DEFAULT_DATASET_DIR), "tasks", split="train")}
    held = [r for r in load_dataset(str(DEFAULT_DATASET_DIR), split="heldout") if not variants[r["variant_id"]]["humaneval"]]
    assert len(held) >= 100
    sample = random.Random(2026).sample(held, 25)
    jobs = []
    for r in sample:
        t, v = tasks[r["task_id"]], variants[r["variant_id"]]
        jobs.append(CheckJob(t["prompt"] + t["canonical_solution"], v["test"], t["entry_point"], prelude=t["prompt"]))
        jobs.append(CheckJob(v["reference"], v["test"], t["entry_point"], prelude=t["prompt"]))
    with SandboxPool() as pool:
        verdicts = pool.check_many(jobs)
    for r, canonical, reference in zip(sample, verdicts[::2], verdicts[1::2]):
        assert not canonical.passed, r["session_id"]
        assert reference.passed, (r["session_id"], reference.status, reference.failure)


def test_other_configs_load():
    tasks = load_dataset(str(DEFAULT_DATASET_DIR), "tasks", split="train")
    assert tasks.num_rows == 164 and all(2 <= len(t["keypoints"]) <= 8 for t in tasks)
    variants = load_dataset(str(DEFAULT_DATASET_DIR), "variants", split="train")
    assert variants.num_rows > 164 and sum(v["humaneval"] for v in variants) == 164
    assert load_dataset(str(DEFAULT_DATASET_DIR), "dimensions", split="train").num_rows >= 8
    assert load_dataset(str(DEFAULT_DATASET_DIR), "personas", split="train").num_rows == 10
    assert load_dataset(str(DEFAULT_DATASET_DIR), "mechanisms", split="train").num_rows == 6
    assert load_dataset(str(DEFAULT_DATASET_DIR), "cells", split="train").num_rows == 60


def test_committed_dataset_validates_and_reports_the_oracle_bound():
    report = validate_folder(DEFAULT_DATASET_DIR)
    assert report.ok, report.summary()
    facts = report.facts
    assert facts["heldout_by_role"]["convention_only"] >= 120
    assert facts["oracle_ft_es"] == round(facts["heldout_fully_resolvable"] / 300, 4) >= 0.4
    assert "oracle ft es" in report.summary()
    # at least 40% need the history: fully resolvable from it, and a hidden value is not HumanEval's
    assert facts["heldout_fully_resolvable"] >= facts["heldout_needing_history"] >= 120
    assert facts["heldout_task_keypoints_refused_by_visible_examples"] > 0
    assert sum(facts["heldout_neutral_items_by_return_kind"].values()) > 0
    # a seeded share of history traces fails twice before the repair
    assert facts["history_two_failed_attempts"] >= 20
    assert max(int(k) for k in facts["history_turn_histogram"]) >= 6


def test_an_unknowable_neutral_is_hidden_only_where_the_history_showed_it():
    from capa_hf.generation.empty_results import empty_kinds, knowable

    kinds = empty_kinds()
    rows = pq.read_table(DEFAULT_DATASET_DIR / "data" / "heldout-00000-of-00001.parquet").to_pylist()
    for r in rows:
        if "empty_input=neutral" in r["variant_id"] and not knowable(kinds.get(r["task_id"])):
            for h in r["hidden_items"]:
                if h["dimension"] == "empty_input":
                    assert h["resolvable_from_history"] and h["revealed_in"], r["session_id"]


def test_needing_history_counts_only_sessions_whose_hidden_values_differ_from_humaneval():
    from capa_hf.dataset.stats import needs_history

    he = {"HumanEval/34": {"container": "list", "sort_order": "ascending"}}
    row = {"task_id": "HumanEval/34", "variant_id": "HumanEval/34@container=tuple+sort_order=ascending",
           "hidden_items": [{"kind": "convention", "dimension": "sort_order", "resolvable_from_history": True}]}
    assert not needs_history(row, he)       # the differing value (tuple) is stated, not hidden
    row["hidden_items"].append({"kind": "convention", "dimension": "container", "resolvable_from_history": True})
    assert needs_history(row, he)
    row["hidden_items"][0]["resolvable_from_history"] = False
    assert not needs_history(row, he)       # not fully resolvable from history


def test_validate_refuses_a_heldout_row_with_a_trace(built, tmp_path):
    from capa_hf.dataset.build import sha256

    out, _ = built
    copy = tmp_path / "capa"
    shutil.copytree(out, copy)
    path = copy / "data" / "heldout-00000-of-00001.parquet"
    table = pq.read_table(path)
    rows = table.to_pylist()
    rows[0]["turns"] = [{"role": "assistant", "content": "```python\ndef f(): pass\n```"}]
    pq.write_table(table.from_pylist(rows, schema=table.schema), path)
    manifest = json.loads((copy / "capa_manifest.json").read_text())
    manifest["files"]["data/heldout-00000-of-00001.parquet"]["sha256"] = sha256(path)
    (copy / "capa_manifest.json").write_text(json.dumps(manifest))
    report = validate_folder(copy)
    assert any("carries a trace" in e for e in report.errors), report.errors


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


def test_card_follows_hub_conventions(built):
    from huggingface_hub import DatasetCard, DatasetCardData

    out, _ = built
    card = DatasetCard.load(out / "README.md")
    data = card.data
    assert isinstance(data, DatasetCardData)
    assert data.license == "mit" and data.source_datasets == ["openai/openai_humaneval"]
    assert data.annotations_creators == ["machine-generated"] and data.multilinguality == ["monolingual"]
    assert "version" not in data.to_dict()
    assert "arxiv.org/abs/2607.26611" in card.text and f"CAPA {V}" in card.text
    assert 'split="heldout"' in card.text
    assert 'load_dataset("dist/capa", split="heldout")' in card.text and "<org>" not in card.text
    assert "## Citation" in card.text and "eprint        = {2607.26611}" in card.text
    manifest = json.loads((out / "capa_manifest.json").read_text())
    assert manifest["version"] == V and len(manifest["files"]) == 8
    # num_bytes are the uncompressed Arrow sizes, as `datasets` itself counts them
    ds = load_dataset(str(out), split="heldout")
    infos = {i["config_name"]: i for i in data.to_dict()["dataset_info"]}
    heldout = next(s for s in infos["default"]["splits"] if s["name"] == "heldout")
    assert heldout["num_bytes"] == ds.data.nbytes
    assert infos["default"]["download_size"] == sum(
        f["bytes"] for f in manifest["files"].values() if f["config"] == "default")
