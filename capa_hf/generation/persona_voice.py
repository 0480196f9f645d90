"""Who a persona speaks for, and whose words a clarification quotes (capa_hf/data/persona_voice.yaml)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from capa_hf.data_files import read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR


@dataclass(frozen=True)
class PersonaVoice:
    solo: frozenset[str]                       # persona ids that speak only for themselves
    group: re.Pattern
    reported: re.Pattern
    solo_habitual: dict[str, tuple[str, ...]]  # keypoint category or dimension -> solo phrasings

    def speaks_for_group(self, text: str) -> bool:
        return bool(self.group.search(text))

    def reports_speech(self, wrap: str) -> bool:
        """A wrap that quotes someone or something else (a reporting word or a source)."""
        return bool(self.reported.search(wrap))


def _words(raw, key: str, path) -> re.Pattern:
    words = raw.get(key)
    if not isinstance(words, list) or not words or not all(isinstance(w, str) and w.strip() for w in words):
        raise DataFileError(path, "expected a list of words", field=key)
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)


@lru_cache(maxsize=2)
def persona_voice(path=None) -> PersonaVoice:
    path = path or DATA_DIR / "persona_voice.yaml"
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise DataFileError(path, "expected a mapping")
    solo = raw.get("solo", [])
    forms = raw.get("solo_habitual", {})
    if not isinstance(solo, list) or not isinstance(forms, dict) or not all(
            isinstance(v, list) and v for v in forms.values()):
        raise DataFileError(path, "expected a 'solo' list and 'solo_habitual' phrase lists", field="solo_habitual")
    return PersonaVoice(frozenset(solo), _words(raw, "group_words", path), _words(raw, "reported_speech", path),
                        {k: tuple(v) for k, v in forms.items()})
