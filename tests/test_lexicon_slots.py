"""Lexicon swaps touch entity nouns only: type words, idioms and literals stay as written."""

import re

from capa_hf.content import load_content
from capa_hf.generation.stage1_lexicon import SWAPPABLE, TYPE_WORDS, fix_articles, kept_phrases, mapping_for


def _mapping(lexicon="logistics_depot"):
    return mapping_for(load_content().lexicons[lexicon], lambda entity, n: 0)


def test_type_words_are_never_swapped():
    m = _mapping()
    assert not set(TYPE_WORDS) & set(SWAPPABLE) and not set(TYPE_WORDS) & set(m.nouns)
    text = "It takes one string and returns the numbers as strings, or an integer count, or a tuple."
    swapped, used = m.swap(text)
    for w in ("string", "strings", "integer count", "a tuple"):
        assert w in swapped
    assert "numbers" not in swapped and used           # "number" is an entity: it is swapped


def test_only_field_nouns_of_the_same_meaning_are_swapped():
    m = _mapping()
    assert "word" not in m.nouns and "character" not in m.nouns      # an SKU is not a word
    swapped, _ = m.swap("break a line of text into its individual words, character by character")
    assert "words" in swapped and "SKU" not in swapped
    assert m.only(["number"]).nouns == {"number": m.nouns["number"]}
    swapped, _ = m.swap("the same number of 1 bits, and a two-number sum")
    assert "number of 1 bits" in swapped and "two-number" in swapped  # idiom and compound stay


def test_idioms_and_literals_stay_as_written():
    m = _mapping()
    assert "in a row" in kept_phrases()
    swapped, _ = m.swap("Several separators in a row become one; a row of numbers is kept, and the word 'number' too.")
    assert "in a row" in swapped and "'number'" in swapped
    assert "of numbers" not in swapped                 # an entity "number" outside the literal is swapped


def test_articles_still_agree_after_a_protected_swap():
    m = _mapping("clinical_cohort")
    swapped, _ = m.swap("Take a number, an maximum and a string, in a row.")
    fixed = fix_articles(swapped)
    assert "in a row" in fixed and "a string" in fixed
    assert swapped != "Take a number, an maximum and a string, in a row."
    for art, noun in re.findall(r"\b(a|an) ([A-Za-z]+)", fixed):
        assert (art == "an") == (noun[0].lower() in "aeiou"), fixed
