"""Which hidden item an assistant's question is about: curated vocabularies, matched by meaning.

Pure and deterministic. A question and every item's texts become *terms*: content-word stems,
with the words of one curated concept group (capa_hf/data/question_vocab.yaml) mapped to the
group's name, so "ends", "endpoints" and "bounds" are one term, and comparison operators
(`<=`, `<`) become words. An item scores

    lexical: the sum, over the question's terms found in the item's texts, of their weight
             among the items still hidden (a term every hidden item shares weighs little);
    cues:    CUE_WEIGHT for every cue of the item (a short phrase of the vocabulary: how people
             ask about a dimension, or the question forms a keypoint's misreading implies) whose
             terms all occur in the question, a longer cue weighing more.

Numbers and code are left out: example values ("2, 4, 6 or 8") are shared by many items and
mean nothing about which one is asked.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from capa_hf.simulator.similarity import STOPWORDS, stem

CUE_WEIGHT = 1.5          # one fully present cue of one term; a cue of n terms weighs CUE_WEIGHT * (1 + (n-1)/2)
MAX_CUES_COUNTED = 3      # at most this many cues of one item add up
MATCH_THRESHOLD = 1.0     # below this best score, the question names no hidden item

_FENCE = re.compile(r"```.*?(```|$)", re.S)
_WORD = re.compile(r"[a-z_]+[a-z0-9_]*|[0-9]+")
_OPERATORS = (("<=", " op_le "), (">=", " op_ge "), ("==", " op_eq "), ("!=", " op_ne "),
              ("≤", " op_le "), ("≥", " op_ge "), ("<", " op_lt "), (">", " op_gt "))
IGNORED = "c_ignore"      # the term of the `ignore` group: set phrases that say nothing about an item
EXTRA_STOPWORDS = frozenset(
    "please thank thanks quick question questions ok okay sure just more also need needs know tell clarify "
    "clarification confirm mean meant here get got right thing things something anything want wanted wonder "
    "wondering curious think assume assuming correct understand understanding make way write writing implement "
    "implementing before detail details go going let check checking happy help start sorry hi hello great "
    "good well am was were been being has have had did doing done don doesn isn aren won shouldn couldn "
    "wouldn didn wasn let's".split())


@dataclass(frozen=True)
class Vocabulary:
    """Concept groups and phrase rewrites (question_vocab.yaml), ready to apply."""

    concepts: Mapping[str, str] = field(default_factory=dict)      # stem -> concept term
    phrases: tuple[tuple[str, str], ...] = ()                      # (lowercase phrase, concept term)

    @classmethod
    def from_groups(cls, groups: Mapping[str, Sequence[str]]) -> "Vocabulary":
        concepts: dict[str, str] = {}
        phrases: list[tuple[str, str]] = []
        for name, words in groups.items():
            term = f"c_{name}"
            for w in words:
                w = w.lower().strip()
                if " " in w or "-" in w:
                    phrases.append((w, term))
                else:
                    concepts[stem(w)] = term
        phrases.sort(key=lambda p: -len(p[0]))          # longest first: "zero-based" before "zero"
        return cls(concepts, tuple(phrases))


def prose(text: str) -> str:
    """The text without fenced code blocks (a submission's code is not a question)."""
    return _FENCE.sub(" ", text or "")


_QUOTED = re.compile(r"""(?<![A-Za-z])['"`]([A-Za-z][A-Za-z ]{0,30})['"`]""")


def terms(text: str, vocab: Vocabulary) -> frozenset[str]:
    raw = prose(text)
    quoted = set(_QUOTED.findall(raw))
    s = " " + raw.lower().replace("’", "'") + " "
    if len({q.lower() for q in quoted}) < len(quoted):
        s += " c_case "       # 'A' and 'a', or 'Hello' and 'hello', side by side: a question about case
    for op, word in _OPERATORS:
        s = s.replace(op, word)
    for phrase, term in vocab.phrases:
        if phrase in s:
            s = re.sub(r"(?<![a-z0-9])" + re.escape(phrase) + r"(?![a-z0-9])", f" {term} ", s)
    out = set()
    for w in _WORD.findall(s):
        if w.isdigit() or w in STOPWORDS or w in EXTRA_STOPWORDS or len(w) == 1:
            continue
        if w.startswith(("c_", "op_")):
            if w != IGNORED:
                out.add(w)
            continue
        st = stem(w)
        out.add(vocab.concepts.get(st, vocab.concepts.get(w, st)))
    return frozenset(out)


@dataclass(frozen=True)
class ItemTerms:
    """One hidden item as the matcher sees it."""

    id: str
    text: frozenset[str]                      # terms of all its texts
    cues: tuple[frozenset[str], ...] = ()     # each cue's terms


def item_terms(item_id: str, texts: Sequence[str], cues: Sequence[str], vocab: Vocabulary) -> ItemTerms:
    cue_terms = tuple(dict.fromkeys(t for t in (terms(c, vocab) for c in cues) if t))   # distinct cues
    all_text = set(terms(" ".join(texts), vocab))
    for c in cue_terms:
        all_text |= c
    return ItemTerms(item_id, frozenset(all_text), cue_terms)


def cue_score(question: frozenset[str], item: ItemTerms) -> float:
    hits = [c for c in item.cues if c <= question]
    # a cue inside a longer hit cue adds nothing of its own
    hits = sorted((len(c) for c in hits if not any(c < d for d in hits)), reverse=True)[:MAX_CUES_COUNTED]
    return sum(CUE_WEIGHT * (1 + (n - 1) / 2) for n in hits)


def scores(question_text: str, items: Sequence[ItemTerms], vocab: Vocabulary) -> list[tuple[float, str]]:
    """(score, item id) for every item, in the items' order."""
    q = terms(question_text, vocab)
    if not q or not items:
        return [(0.0, it.id) for it in items]
    n = len(items)
    df: dict[str, int] = {}
    for it in items:
        for t in it.text & q:
            df[t] = df.get(t, 0) + 1
    out = []
    for it in items:
        lexical = sum(math.log((n + 1) / df[t]) for t in it.text & q)
        out.append((round(lexical + cue_score(q, it), 6), it.id))
    return out


_QUESTION = re.compile(r"[^.?!]*\?")
# where one question sentence turns into a second question: ", and is ...", " and what ..."
_SECOND = re.compile(r",?\s+(?:and|or|also)\s+(?=(?:what|how|which|when|where|why|who|is|are|do|does|did|should|"
                     r"can|could|will|would|must|shall|if)\b)", re.I)


def question_parts(text: str) -> list[str]:
    """The separate questions of a reply: each sentence that ends in a question mark, split again
    where a second question is joined on ("..., and what should an empty string return?")."""
    out = []
    for sentence in _QUESTION.findall(prose(text)):
        out += [p.strip() for p in _SECOND.split(sentence) if p.strip()]
    return out


def best_match(question_text: str, items: Sequence[ItemTerms], vocab: Vocabulary,
               threshold: float = MATCH_THRESHOLD) -> tuple[str | None, float]:
    """The best-scoring item (the earlier one on a tie) and its score; None below the threshold."""
    scored = scores(question_text, items, vocab)
    if not scored:
        return None, 0.0
    best_i = max(range(len(scored)), key=lambda i: (scored[i][0], -i))
    score, item_id = scored[best_i]
    return (item_id if score >= threshold else None), score
