"""Lexicon swaps touch entity nouns only: type words, idioms and literals stay as written."""

import re

from capa_hf.content import load_content
from capa_hf.generation.stage1_lexicon import SWAPPABLE, TYPE_WORDS, fix_articles, kept_phrases, mapping_for


def _mapping(lexicon="logistics_depot"):
    return mapping_for(load_content().lexicons[lexicon], lambda entity, n: 0)


def test_type_words_are_never_swapped():
    m = _mapping()
    assert not set(TYPE_WORDS) & set(SWAPPABLE) and not set(TYPE_WORDS) & set(m.nouns)
    text = "It takes one string and returns the words as strings, or an integer count, or a tuple."
    swapped, used = m.swap(text)
    for w in ("string", "strings", "integer count", "a tuple"):
        assert w in swapped
    assert "words" not in swapped and used             # "word" is an entity: it is swapped


def test_idioms_and_literals_stay_as_written():
    m = _mapping()
    assert "in a row" in kept_phrases()
    swapped, _ = m.swap("Several separators in a row become one; a row of digits is kept, and the word 'letter' too.")
    assert "in a row" in swapped and "'letter'" in swapped
    assert "a row of" not in swapped                   # an entity "row" outside the idiom is swapped
    assert "digits" not in swapped


def test_articles_still_agree_after_a_protected_swap():
    m = _mapping("clinical_cohort")
    swapped, _ = m.swap("Take a element, an digit and a string, in a row.")
    fixed = fix_articles(swapped)
    assert "in a row" in fixed and "a string" in fixed
    assert swapped != "Take a element, an digit and a string, in a row."
    for art, noun in re.findall(r"\b(a|an) ([A-Za-z]+)", fixed):
        assert (art == "an") == (noun[0].lower() in "aeiou"), fixed
