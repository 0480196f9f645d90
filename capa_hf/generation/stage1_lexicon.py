"""Domain-cognitive polysemy: swap common CS nouns for a discipline's established nouns.

Only entity nouns in open text are swapped, and only for a field noun that names the same thing
(capa_hf/data/lexicon_keep.yaml `same_meaning`: "quantity" for a number, never "SKU" for a word).
A request swaps at most `MAX_SWAPS` entities (`Mapping.only`), each glossed once. What stays as written:
- type words (`TYPE_WORDS`: "list", "string", "integer", ...): a request that says what a
  function returns keeps saying it ("returns the words as strings", not "... as waybills");
- idioms and fixed phrases (capa_hf/data/lexicon_keep.yaml: "in a row", "at a time", ...);
- literals: anything quoted or in backticks;
- a word joined to another by a hyphen ("letter-grade", "two-digit"), or next to another entity
  word in a noun compound ("digit sum").
`fix_articles` then makes every article agree with the noun that follows it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from capa_hf.schema import Lexicon

# Entities swapped inside sentences. Verb-like entities (sort, filter, count, set) are left out:
# in running text they are mostly verbs, and swapping a verb for a noun breaks the sentence.
# Type words are left out too: they say what goes in and comes out.
TYPE_WORDS = ("list", "array", "sequence", "dictionary", "string", "integer", "float", "tuple", "boolean")
SWAPPABLE = (
    "character", "word", "sentence", "number", "digit", "pair", "element", "sum", "product", "maximum",
    "minimum", "average", "prefix", "suffix", "substring", "graph", "matrix", "row", "column", "interval",
    "duplicate", "vowel", "letter",
)
MAX_SWAPS = 2             # entities one request may swap
_ENTITY_WORDS = frozenset(w for e in TYPE_WORDS + SWAPPABLE for w in (e, e + "s"))
_LITERAL = re.compile(r"(?<![A-Za-z])'[^'\n]*'(?![A-Za-z])|\"[^\"\n]*\"|`[^`\n]*`")


def _keep_file():
    from capa_hf.data_files import read_yaml
    from capa_hf.paths import DATA_DIR

    path = DATA_DIR / "lexicon_keep.yaml"
    return path, read_yaml(path)


@lru_cache(maxsize=1)
def kept_phrases() -> tuple[str, ...]:
    """Idioms and fixed phrases no swap may touch (capa_hf/data/lexicon_keep.yaml)."""
    from capa_hf.errors import DataFileError

    path, raw = _keep_file()
    if not isinstance(raw, dict) or not isinstance(raw.get("keep"), list) or not all(
            isinstance(p, str) and p.strip() for p in raw["keep"]):
        raise DataFileError(path, "expected a 'keep' list of phrases", field="keep")
    return tuple(sorted({p.strip().lower() for p in raw["keep"]}, key=len, reverse=True))


@lru_cache(maxsize=1)
def same_meaning() -> dict[str, dict[str, frozenset[str]]]:
    """Lexicon id -> entity -> the field nouns (singular) that name the same thing as the entity."""
    from capa_hf.errors import DataFileError

    path, raw = _keep_file()
    table = raw.get("same_meaning") if isinstance(raw, dict) else None
    if not isinstance(table, dict) or not all(
            isinstance(ents, dict) and all(isinstance(v, list) and v and all(isinstance(w, str) for w in v)
                                           for v in ents.values()) for ents in table.values()):
        raise DataFileError(path, "expected 'same_meaning': lexicon id -> entity -> list of field nouns",
                            field="same_meaning")
    return {lex: {e: frozenset(v) for e, v in ents.items()} for lex, ents in table.items()}


@lru_cache(maxsize=1)
def _math_rule() -> tuple[frozenset[str], re.Pattern]:
    from capa_hf.errors import DataFileError

    path, raw = _keep_file()
    ents, words = (raw.get("math_entities"), raw.get("math_words")) if isinstance(raw, dict) else (None, None)
    if not all(isinstance(v, list) and v and all(isinstance(w, str) and w.strip() for w in v) for v in (ents, words)):
        raise DataFileError(path, "expected 'math_entities' and 'math_words': lists of words", field="math_words")
    return frozenset(ents), re.compile(r"\b(?:" + "|".join(re.escape(w.strip()) for w in words) + r")", re.IGNORECASE)


def math_kept(entities, task_text: str) -> list[str]:
    """`entities` less those a task about numbers as numbers keeps as written
    (lexicon_keep.yaml `math_entities`, `math_words`)."""
    kept, words = _math_rule()
    if not words.search(task_text):
        return list(entities)
    return [e for e in entities if e not in kept]


def protected_spans(text: str, phrases: tuple[str, ...]) -> list[tuple[int, int]]:
    """Character ranges of literals and kept phrases."""
    spans = [m.span() for m in _LITERAL.finditer(text)]
    for phrase in phrases:
        spans += [m.span() for m in re.finditer(r"\b" + re.escape(phrase) + r"\b", text, flags=re.IGNORECASE)]
    return spans
_IRREGULAR = {"matrix": "matrices", "index": "indices", "dictionary": "dictionaries",
              "maximum": "maxima", "minimum": "minima", "prefix": "prefixes", "suffix": "suffixes"}


def plural(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


@dataclass(frozen=True)
class Mapping:
    """The fixed choice of domain noun per CS entity for one user (cell)."""

    lexicon_id: str
    nouns: dict  # entity -> (sg, pl)
    keep: tuple[str, ...] = ()   # phrases left as written (kept_phrases())

    def only(self, entities) -> "Mapping":
        """The same choices, restricted to `entities`."""
        return Mapping(self.lexicon_id, {e: n for e, n in self.nouns.items() if e in entities}, self.keep)

    def entities_in(self, text: str) -> list[str]:
        """The entities a swap of `text` would replace, in order of first appearance."""
        return [entity for _, entity in self.swap(text)[1]]

    def swap(self, text: str) -> tuple[str, list[tuple[str, str]]]:
        """Return the rewritten text and the (domain noun, cs noun) pairs used, in order."""
        used: list[tuple[str, str]] = []
        spans = protected_spans(text, self.keep)

        def sub(match: re.Match) -> str:
            word = match.group(0)
            if any(a <= match.start() < b for a, b in spans):
                return word
            if text[match.end():match.end() + 1] == "-" or text[max(match.start() - 1, 0):match.start()] == "-":
                return word  # part of a compound ("letter-grade", "two-digit")
            before_w = [w.split("-")[-1] for w in text[: match.start()].split()[-1:]]
            after_w = [w.split("-")[0] for w in text[match.end():].split()[:1]]
            if any(w.strip(".,;:()").lower() in _ENTITY_WORDS for w in before_w + after_w):
                return word  # a noun compound of two entities ("digit sum", "number string") stays whole
            low = word.lower()
            before = text[: match.start()].rstrip()
            if not before or before[-1] in ".!?:;":
                return word  # sentence-initial words are mostly verbs ("List the ...", "Sort ...")
            for entity, (sg, pl) in self.nouns.items():
                if low == entity or low == plural(entity):
                    noun = pl if low != entity else sg
                    if (noun, entity) not in used and (sg, entity) not in used:
                        used.append((sg, entity))
                    return noun
            return word

        pattern = r"\b(" + "|".join(
            sorted({w for e in self.nouns for w in (e, plural(e))}, key=len, reverse=True)) + r")\b"
        return re.sub(pattern, sub, text, flags=re.IGNORECASE), used


def mapping_for(lexicon: Lexicon, choose) -> Mapping:
    """`choose(entity, n)` returns the variant index; the caller seeds it by cell. Only the terms
    that name the same thing as their entity (`same_meaning`) are candidates."""
    safe = same_meaning().get(lexicon.id, {})
    nouns = {}
    for entity in SWAPPABLE:
        terms = [t for t in lexicon.terms.get(entity, ()) if t.sg in safe.get(entity, ())]
        if terms:
            t = terms[choose(entity, len(terms))]
            nouns[entity] = (t.sg, t.pl)
    return Mapping(lexicon.id, nouns, kept_phrases())


# Words spelled with a leading vowel letter but said with a consonant sound, and the reverse.
_CONSONANT_SOUND = ("uni", "use", "usa", "usu", "uti", "ure", "eu", "one", "once", "ubi")
_VOWEL_SOUND_H = ("hour", "honest", "honor", "honour", "heir")
_LETTER_VOWEL = set("AEFHILMNORSX")    # letters whose names start with a vowel sound (an MD5, an SQL)
_ARTICLE = re.compile(r"\b(a|an|A|An)(\s+)([\"'(]?)([A-Za-z][\w-]*)")


def wants_an(word: str) -> bool:
    """Whether `word` takes "an": by its sound, as far as spelling tells."""
    if len(word) > 1 and word.isupper():
        return word[0] in _LETTER_VOWEL
    low = word.lower()
    if low.startswith(_VOWEL_SOUND_H):
        return True
    return low[0] in "aeiou" and not low.startswith(_CONSONANT_SOUND)


def fix_articles(text: str) -> str:
    """Make every "a"/"an" agree with the word after it (also after a lexicon swap)."""
    def sub(m: re.Match) -> str:
        art, space, quote, word = m.groups()
        right = "an" if wants_an(word) else "a"
        if art[0].isupper():
            right = right.capitalize()
        return f"{right}{space}{quote}{word}"
    return _ARTICLE.sub(sub, text)
