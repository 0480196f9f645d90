"""Malformed data files fail with an error that names the file and the field."""

import shutil

import pytest
import yaml

from capa_hf.content import load_mechanisms, load_personas, load_task_contents
from capa_hf.errors import DataFileError
from capa_hf.humaneval import load_tasks
from capa_hf.paths import DATA_DIR


def test_shipped_mechanisms_load():
    mechs = load_mechanisms()
    assert len(mechs) == 6
    assert {m.abbrev for m in mechs.values()} == {"DCP", "SLM", "HCO", "SBM", "CCM", "ICU"}


def test_mechanism_with_bad_operation_names_file_and_field(tmp_path):
    raw = yaml.safe_load((DATA_DIR / "mechanisms.yaml").read_text())
    raw["mechanisms"][2]["operation"] = "teleport"
    path = tmp_path / "mechanisms.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_mechanisms(path)
    assert exc.value.path == str(path)
    assert exc.value.field == "mechanisms.2.operation"
    assert "mechanisms.yaml" in str(exc.value) and "operation" in str(exc.value)


def test_mechanism_missing_field(tmp_path):
    raw = yaml.safe_load((DATA_DIR / "mechanisms.yaml").read_text())
    del raw["mechanisms"][0]["resolution"]
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_mechanisms(path)
    assert exc.value.field == "mechanisms.0.resolution"


def test_unparsable_yaml_names_file(tmp_path):
    path = tmp_path / "mechanisms.yaml"
    path.write_text("mechanisms: [\n  - id: x\n bad")
    with pytest.raises(DataFileError, match="not valid YAML") as exc:
        load_mechanisms(path)
    assert str(path) in str(exc.value)


def _persona_copy(tmp_path):
    folder = tmp_path / "personas"
    shutil.copytree(DATA_DIR / "personas", folder)
    return folder


def test_persona_wrap_without_slot_names_field(tmp_path):
    folder = _persona_copy(tmp_path)
    raw = yaml.safe_load((folder / "P03.yaml").read_text())
    raw["voice"]["clarification_wraps"][1] = "no slot here"
    (folder / "P03.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_personas(folder)
    assert exc.value.path.endswith("P03.yaml")
    assert exc.value.field == "voice.clarification_wraps"


def test_persona_bad_verbosity_and_missing_traits(tmp_path):
    folder = _persona_copy(tmp_path)
    raw = yaml.safe_load((folder / "P07.yaml").read_text())
    raw["traits"]["verbosity"] = "chatty"
    (folder / "P07.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_personas(folder)
    assert exc.value.field == "traits.verbosity"
    raw["traits"]["verbosity"] = "terse"
    del raw["voice"]
    (folder / "P07.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_personas(folder)
    assert exc.value.field == "voice"


def test_persona_id_must_match_file(tmp_path):
    folder = _persona_copy(tmp_path)
    raw = yaml.safe_load((folder / "P02.yaml").read_text())
    raw["id"] = "P09"
    (folder / "P02.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_personas(folder)
    assert exc.value.field == "id" and exc.value.path.endswith("P02.yaml")


def test_keypoint_bad_category_names_file_and_field(tmp_path):
    folder = tmp_path / "keypoints"
    folder.mkdir()
    raw = yaml.safe_load((DATA_DIR / "keypoints" / "HumanEval_0.yaml").read_text())
    raw["keypoints"][1]["category"] = "vibes"
    (folder / "HumanEval_0.yaml").write_text(yaml.safe_dump(raw))
    with pytest.raises(DataFileError) as exc:
        load_task_contents(folder)
    assert exc.value.field == "keypoints.1.category"


def test_humaneval_comes_from_the_package():
    tasks = load_tasks()
    assert len(tasks) == 164
    assert list(tasks)[:3] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    t = tasks["HumanEval/0"]
    assert t.entry_point == "has_close_elements" and "def check(candidate)" in t.test
