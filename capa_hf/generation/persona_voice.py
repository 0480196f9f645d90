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
    solo_habitual: dict[str, tuple[str, ...]]  # convention dimension -> solo phrasings
    fields: dict[str, str] = None              # persona id -> how it names its field after "in"
    owned: tuple = ()                          # (pattern, persona ids that may use its words)
    practices: dict = None                     # persona id -> (its own records, dimensions they settle)

    def practice(self, persona_id: str, dimension: str) -> str | None:
        """The persona's own records ("our freight manifests") when their practice plausibly
        settles `dimension`; None when it does not (another family stands in then)."""
        words, dims = (self.practices or {}).get(persona_id, (None, frozenset()))
        return words if dimension in dims else None

    def speaks_for_group(self, text: str) -> bool:
        return bool(self.group.search(text))

    def foreign_words(self, text: str, persona_id: str) -> list[str]:
        """Words of `text` that belong to other personas' work or register only."""
        return [m.group(0) for pattern, ids in self.owned if persona_id not in ids for m in pattern.finditer(text)]

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
    fields, owned = raw.get("fields", {}), raw.get("owned", [])
    if not isinstance(fields, dict) or not all(isinstance(v, str) and v.strip() for v in fields.values()):
        raise DataFileError(path, "expected 'fields': persona id -> a phrase", field="fields")
    if not isinstance(owned, list) or not all(isinstance(o, dict) and isinstance(o.get("personas"), list)
                                              for o in owned):
        raise DataFileError(path, "expected 'owned': a list of {words, personas}", field="owned")
    practices = raw.get("practices", {})
    if not isinstance(practices, dict) or not all(
            isinstance(v, dict) and isinstance(v.get("words"), str) and isinstance(v.get("dimensions"), list)
            for v in practices.values()):
        raise DataFileError(path, "expected 'practices': persona id -> {words, dimensions}", field="practices")
    return PersonaVoice(frozenset(solo), _words(raw, "group_words", path), _words(raw, "reported_speech", path),
                        {k: tuple(v) for k, v in forms.items()}, dict(fields),
                        tuple((_words(o, "words", path), frozenset(o["personas"])) for o in owned),
                        {k: (v["words"], frozenset(v["dimensions"])) for k, v in practices.items()})
