"""The blind review's results file: its format, coverage and the rubric's counts."""

import pytest
import yaml

from capa_hf.dataset.review import REVIEW_DIR, load_review, review_counts
from capa_hf.errors import DataFileError

SHA = "0" * 64


def _write(tmp_path, data):
    path = tmp_path / "0.3.0.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _held(fluency="fluent", settled=()):
    return {"reviewer": "a", "settled": list(settled), "fluency": fluency, "persona_holds": True}


def _hist(ok=True):
    return {"reviewer": "b", "answers_question_asked": ok, "habit_own": True, "persona_holds": True,
            "back_reference": "none"}


def test_counts_and_coverage(tmp_path):
    data = {"dataset_version": "0.3.0", "manifest_sha256": SHA, "reviewers": ["a", "b"], "agreement_seed": 26,
            "heldout": {"C01-S06": _held(), "C01-S07": _held("awkward", [{"item": "h1", "quote": "a position"}]),
                        "C01-S08": _held("garbled")},
            "history": {"C01-S01": _hist(), "C01-S02": _hist(False)}}
    review = load_review(_write(tmp_path, data))
    held, hist = {"C01-S06", "C01-S07", "C01-S08"}, {"C01-S01", "C01-S02"}
    c = review_counts(review, held, hist)
    assert c["complete"] and c["settled"] == 1 and c["awkward"] == 1 and c["garbled"] == 1
    assert c["off_question"] == 1 and not c["meets_targets"]
    assert not review_counts(review, held | {"C01-S09"}, hist)["complete"]     # a session left unreviewed
    data["heldout"] = {k: _held() for k in held}
    data["history"] = {k: _hist() for k in hist}
    assert review_counts(load_review(_write(tmp_path, data)), held, hist)["meets_targets"]


def test_a_bad_grade_is_named(tmp_path):
    data = {"dataset_version": "0.3.0", "manifest_sha256": SHA, "reviewers": ["a"], "agreement_seed": 1,
            "heldout": {"C01-S06": _held("odd")}}
    with pytest.raises(DataFileError, match="heldout.C01-S06.fluency"):
        load_review(_write(tmp_path, data))


def test_validate_reports_the_review_of_its_version_and_says_when_there_is_none(tmp_path):
    import json
    import shutil

    from capa_hf.dataset.validate import validate_folder
    from capa_hf.paths import DEFAULT_DATASET_DIR

    report = validate_folder(DEFAULT_DATASET_DIR)
    version = json.loads((DEFAULT_DATASET_DIR / "capa_manifest.json").read_text())["version"]
    if (REVIEW_DIR / f"{version}.yaml").is_file():
        counts = report.facts["blind_review"]
        assert counts["complete"] and counts["heldout_reviewed"] == 300 and counts["history_reviewed"] == 300
    copy = tmp_path / "capa"
    shutil.copytree(DEFAULT_DATASET_DIR, copy)
    manifest = json.loads((copy / "capa_manifest.json").read_text())
    manifest["version"] = "9.9.9"
    (copy / "capa_manifest.json").write_text(json.dumps(manifest))
    report = validate_folder(copy)
    assert any(n.startswith("blind review: none for version 9.9.9") for n in report.notes)
    assert "blind_review" not in report.facts


def test_the_card_names_the_oracle_for_what_it_is_and_the_sessions_that_need_history():
    from capa_hf.dataset.card import oracle_paragraph
    from capa_hf.paths import DEFAULT_DATASET_DIR

    text = oracle_paragraph({"heldout_sessions": 300, "heldout_fully_resolvable": 136, "oracle_ft_es": 0.4533,
                             "heldout_needing_history": 135})
    assert "Oracle FT-ES 45.3%" in text and "not an upper bound" in text and "135 of 300" in text
    card = (DEFAULT_DATASET_DIR / "README.md").read_text(encoding="utf-8")
    assert "There are eight" in card and "need history" in card and "oracle bound" not in card
