"""The curated data the scripted user matches with, read once per process.

- capa_hf/data/question_vocab.yaml: concept groups and each dimension's cues;
- capa_hf/data/keypoint_questions.yaml: the question forms a keypoint's misreading implies,
  with the variants file's own `asks` for the keypoint added;
- capa_hf/data/variant_ties/<task>.json: for each variant test, which hidden items each failing
  line tells apart (written by `capa regen-ties`, see capa_hf/variants/ties.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

from capa_hf.data_files import read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR
from capa_hf.simulator.question_match import Vocabulary, best_match, item_terms

VOCAB_FILE = DATA_DIR / "question_vocab.yaml"
KEYPOINT_QUESTIONS_FILE = DATA_DIR / "keypoint_questions.yaml"
TIES_DIR = DATA_DIR / "variant_ties"
VARIANTS_DIR = DATA_DIR / "variants"


def _file(task_id: str) -> str:
    return task_id.replace("/", "_")


@lru_cache(maxsize=None)
def question_vocab(path: Path = VOCAB_FILE) -> tuple[Vocabulary, Mapping[str, tuple[str, ...]],
                                                     Mapping[str, tuple[str, ...]]]:
    """The concept groups as a Vocabulary, each dimension's cues, and each keypoint category's."""
    raw = read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("concepts"), dict) or not isinstance(
            raw.get("dimensions"), dict):
        raise DataFileError(path, "expected the mappings `concepts` and `dimensions`")
    for name, words in raw["concepts"].items():
        if not isinstance(words, list) or not all(isinstance(w, str) and w.strip() for w in words):
            raise DataFileError(path, "expected a list of words", field=f"concepts.{name}")
    cues = {}
    for dim, spec in raw["dimensions"].items():
        forms = (spec or {}).get("cues")
        if not isinstance(forms, list) or not forms:
            raise DataFileError(path, "expected a non-empty list of cues", field=f"dimensions.{dim}.cues")
        cues[dim] = tuple(str(c) for c in forms)
    categories = {}
    for cat, spec in (raw.get("categories") or {}).items():
        forms = (spec or {}).get("cues")
        if not isinstance(forms, list):
            raise DataFileError(path, "expected a list of cues", field=f"categories.{cat}.cues")
        categories[cat] = tuple(str(c) for c in forms)
    return Vocabulary.from_groups(raw["concepts"]), cues, categories


@lru_cache(maxsize=None)
def curated_forms(path: Path = KEYPOINT_QUESTIONS_FILE) -> Mapping[str, Mapping[str, tuple[str, ...]]]:
    raw = read_yaml(path) if path.is_file() else {}
    if not isinstance(raw, dict):
        raise DataFileError(path, "expected a mapping of task id -> keypoint id -> question forms")
    out = {}
    for task_id, kps in raw.items():
        if not isinstance(kps, dict):
            raise DataFileError(path, "expected a mapping of keypoint id -> question forms", field=str(task_id))
        out[task_id] = {k: tuple(str(f) for f in forms) for k, forms in kps.items()}
    return out


@lru_cache(maxsize=None)
def _variants_file(task_id: str) -> Mapping:
    path = VARIANTS_DIR / f"{_file(task_id)}.yaml"
    return (read_yaml(path) or {}) if path.is_file() else {}


def _asks(task_id: str) -> Mapping[str, str]:
    return dict(_variants_file(task_id).get("asks") or {})


@lru_cache(maxsize=None)
def _dimensions():
    from capa_hf.conventions import load_dimensions

    return load_dimensions()


def stated_line(task_id: str, dimension: str, value: str, request: str = "") -> str:
    """How the user states a convention plainly: the `state` line its request used (when one of
    them is in it), else the first, with the task's nouns."""
    nouns = {"result": "the result", "input": "the input", **(_variants_file(task_id).get("nouns") or {})}
    own = ((_variants_file(task_id).get("state_lines") or {}).get(dimension) or {}).get(value)
    forms = [f.format(**nouns) for f in (own or _dimensions()[dimension].value(value).state)]
    low = request.lower()
    return next((f for f in forms if f.lower().rstrip(".") in low), forms[0])


def keypoint_ask(task_id: str, keypoint_id: str) -> str | None:
    """The variants file's `asks` line for one keypoint (None when it has none)."""
    return _asks(task_id).get(keypoint_id)


def names_other_item(text: str, task_id: str, keypoint_id: str, keypoints: Sequence) -> str | None:
    """For a signature (data_type) keypoint: the keypoint of another category that a question
    `text` names first, matched by meaning against the task's `keypoints` (their question, plain
    line, description, original text, curated question forms and category cues; no asks lines);
    None when it names a signature keypoint, nothing, or the keypoint is of another category.
    A question about what the result counts or holds ("one total, or a count for each well?")
    is settled by such another keypoint, and the signature line ("... and returns an integer")
    would answer it off the point."""
    by_id = {k.id: k for k in keypoints}
    own = by_id.get(keypoint_id)
    if own is None or own.category != "data_type":
        return None
    vocab, _, category_cues = question_vocab()
    forms = curated_forms().get(task_id, {})
    items = [item_terms(k.id, (k.question, k.plain, k.description, k.original_text),
                        tuple(forms.get(k.id, ())) + tuple(category_cues.get(k.category, ())), vocab)
             for k in keypoints]
    best, _ = best_match(text, items, vocab)
    return best if best is not None and by_id[best].category != "data_type" else None


def ask_fits(task_id: str, keypoint_id: str, keypoints: Sequence) -> bool:
    """Whether the keypoint has an `asks` line and it is about that keypoint (names_other_item)."""
    ask = keypoint_ask(task_id, keypoint_id)
    return bool(ask) and names_other_item(ask, task_id, keypoint_id, keypoints) is None


def keypoint_questions(task_id: str, keypoint_id: str, keypoints: Sequence = ()) -> tuple[str, ...]:
    """The question forms of one keypoint: curated ones first, then the variants file's ask
    (given the task's `keypoints`, only when the ask is about this keypoint: ask_fits)."""
    forms = list(curated_forms().get(task_id, {}).get(keypoint_id, ()))
    ask = keypoint_ask(task_id, keypoint_id)
    if ask and keypoints and not ask_fits(task_id, keypoint_id, keypoints):
        ask = None
    return tuple(forms + ([ask] if ask else []))


def ties_file(task_id: str, folder: Path | None = None) -> Path:
    return (folder or TIES_DIR) / f"{_file(task_id)}.json"


@lru_cache(maxsize=None)
def ties_record(task_id: str) -> Mapping:
    path = ties_file(task_id)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, f"not valid JSON: {exc}") from None


def variant_ties(variant_id: str) -> Mapping[str, Mapping[str, list]]:
    """Failing test line (stripped) -> {ref: signatures of what that ref's alternatives give
    there} for the refs (dimension ids, keypoint ids) the line tells apart, for one variant
    (`HumanEval/12@container=tuple`); empty when none were recorded."""
    if "@" not in variant_id:
        return {}
    task_id, key = variant_id.split("@", 1)
    return (ties_record(task_id).get("variants") or {}).get(key) or {}
