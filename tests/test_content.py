"""The curated content passes the validator, and the validator catches what it promises to."""

import shutil

import yaml

import capa_hf.content as content_mod
from capa_hf.content import load_task_contents
from capa_hf.paths import DATA_DIR
from capa_hf.validate_content import LEXICON_ENTITIES, validate


def test_shipped_content_is_valid_and_complete():
    report = validate(strict=True)
    assert report.ok, report.summary()
    assert report.n_tasks == 164 and report.n_personas == 10
    assert all(report.categories[c] > 0 for c in ("data_type", "core_definition", "logical_control",
                                                   "boundary_condition"))
    assert 2 <= report.n_keypoints / report.n_tasks <= 8


def test_every_lexicon_covers_every_entity():
    for lex in content_mod.load_lexicons().values():
        assert set(LEXICON_ENTITIES) <= set(lex.terms), lex.id


def _broken_copy(tmp_path, monkeypatch, edit, name="HumanEval_0.yaml"):
    folder = tmp_path / f"keypoints-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(DATA_DIR / "keypoints", folder)
    path = folder / name
    raw = yaml.safe_load(path.read_text())
    edit(raw)
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    monkeypatch.setattr(content_mod, "load_task_contents", lambda folder_=None: load_task_contents(folder))
    content_mod.load_content.cache_clear()
    try:
        return validate(strict=True, sandbox=False)   # the keypoint text checks; the sandbox ones run above
    finally:
        content_mod.load_content.cache_clear()


def test_validator_flags_vague_that_repeats_a_literal(tmp_path, monkeypatch):
    def edit(raw):
        raw["keypoints"][1].update(original_text="numbers: List[float], threshold: float) -> bool",
                                   vague="hand it some float values and get a bool back")
    report = _broken_copy(tmp_path, monkeypatch, edit)
    assert report.ok, report.summary()  # no numeral or quoted literal to repeat

    def edit_numeral(raw):
        raw["keypoints"][1].update(original_text="0 <= number <= 1000", vague="up to 1000 or so")
    report = _broken_copy(tmp_path, monkeypatch, edit_numeral, name="HumanEval_159.yaml")
    assert [e for e in report.errors if "HumanEval_159.yaml:kp_02" in e and "'1000'" in e], report.errors


def test_validator_flags_text_not_in_prompt(tmp_path, monkeypatch):
    report = _broken_copy(tmp_path, monkeypatch,
                          lambda raw: raw["keypoints"][1].update(original_text="a sentence HumanEval never wrote"))
    assert not report.ok
    assert any("not verbatim" in e and "HumanEval_0.yaml:kp_02" in e for e in report.errors)


def test_literal_detection():
    from capa_hf.text_literals import repeated_literals
    assert repeated_literals("return 'Yes' when x > 3", "say Yes above 3") == ["3", "Yes"]
    assert repeated_literals("return 'Yes' when x > 3", "say 'Yes' above three") == ["Yes"]
    assert repeated_literals("at most 10 items", "a dozen or so") == []


def test_content_loader_reads_all_files():
    assert len(load_task_contents()) == 164
