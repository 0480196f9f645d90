"""Stand-ins that fit: which obscuring phrases may stand for which task keypoint.

Each phrase of a Stage 1 family declares what it can stand for (a limit, an order, a container,
a step of the computation, an empty-case rule, a selection) by the words it uses; the kinds and
their words are data (capa_hf/data/stand_in_kinds.yaml). A phrase that declares no kind stands
for anything. Stage 1 picks a phrase only among those that fit the keypoint; when none does, the
keypoint's own vague line stands in (it was written for that keypoint).
"""

from __future__ import annotations

import re
from functools import lru_cache

from capa_hf.data_files import read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR


@lru_cache(maxsize=2)
def _data(path=None) -> dict:
    return read_yaml(path or DATA_DIR / "stand_in_kinds.yaml")


def category_kinds() -> dict[str, frozenset[str]]:
    raw = _data().get("category_kinds", {})
    if not isinstance(raw, dict):
        raise DataFileError(DATA_DIR / "stand_in_kinds.yaml", "expected a mapping", field="category_kinds")
    return {c: frozenset(v) for c, v in raw.items()}


@lru_cache(maxsize=2)
def kind_patterns(path=None) -> dict[str, re.Pattern]:
    path = path or DATA_DIR / "stand_in_kinds.yaml"
    raw = _data(path)
    kinds = raw.get("kinds") if isinstance(raw, dict) else None
    if not isinstance(kinds, dict) or not kinds or not all(
            isinstance(v, list) and v and all(isinstance(w, str) and w.strip() for w in v) for v in kinds.values()):
        raise DataFileError(path, "expected 'kinds': a mapping of kind -> list of words", field="kinds")
    return {k: re.compile(r"\b(?:" + "|".join(re.escape(w.strip()) for w in v) + r")", re.IGNORECASE)
            for k, v in kinds.items()}


def kinds_of(text: str) -> frozenset[str]:
    return frozenset(k for k, p in kind_patterns().items() if p.search(text))


def fits(phrase: str, keypoint) -> bool:
    """Whether `phrase` can stand for `keypoint` (a schema Keypoint)."""
    declared = kinds_of(re.sub(r"\{\w+\}", "", phrase))
    own = kinds_of(keypoint.description) | category_kinds().get(keypoint.category, frozenset())
    return not declared or bool(declared & own)


def fitting(phrases, keypoint) -> list[str]:
    return [p for p in phrases if fits(p, keypoint)]
