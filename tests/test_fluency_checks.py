"""Fluency and persona checks on every Stage 1 request: the slips of the 0.2.1 blind review
(docs/review/results/0.2.1.yaml) that a rule can see are caught, and no request of the build has one."""

import pytest

from capa_hf.content import load_content
from capa_hf.generation.fluency_checks import (empty_slips, field_slips, foreign_words, gloss_slips, operator_slips,
                                               stiff_slips, swap_slips, template_slips)
from capa_hf.generation.stage1_lexicon import MAX_SWAPS, Mapping, kept_phrases, mapping_for, same_meaning


@pytest.fixture(scope="module")
def sessions(default_plans):
    from capa_hf.generation.pipeline import request_context
    from capa_hf.generation.stage1_realize import TemplateRealizer, cell_mapping

    w, cells, plans, slots = default_plans
    realizer = TemplateRealizer()
    out = []
    for cell in cells:
        for pos in range(1, 11):
            sid = f"{cell.cell_id}-S{pos:02d}"
            ctx = request_context(cell, plans[sid], w, 0, 0, slots[sid])
            full = cell_mapping(ctx)
            mapping = full.only(realizer.swapped_entities(ctx, full)) if any(
                i.mechanism.operation == "lexicon" for i in ctx.plan.items) else full.only(())
            out.append((cell, ctx, mapping, realizer.realize(ctx)))
    return out


def test_the_reviewers_slips_are_caught():
    lex = load_content().lexicons
    logistics = Mapping("logistics_depot", {"word": ("SKU", "SKUs"), "character": ("barcode symbol", "barcode symbols")})
    assert any("SKU" in s for s in swap_slips("break a line of text into its individual SKUs", logistics))
    clinical = Mapping("clinical_cohort", {"vowel": ("flagged initial", "flagged initials"), "letter": ("initial", "initials")})
    assert "flagged initial initials" in swap_slips("Count the usual flagged initial initials.", clinical)
    design = Mapping("design_system", {"character": ("glyph", "glyphs"), "letter": ("alphabetic glyph", "alphabetic glyphs")})
    assert any("inside" in s for s in swap_slips("a glyph", design))
    logistics_sum = Mapping("logistics_depot", {"sum": ("consolidated total", "consolidated totals")})
    assert swap_slips("comparing its digit consolidated total with 0", logistics_sum)
    many = mapping_for(lex["wet_lab"], lambda e, n: 0)
    assert len(many.nouns) > MAX_SWAPS and swap_slips("", many)
    m = Mapping("legacy_ledger", {"number": ("figure", "figures")})
    assert gloss_slips("a figure", ['By "figure" I just mean a number.', 'Translate "figure" as number.'], m)
    for slip in ("Sort the sorted words in descending order.", "returns how many of them qualify as an integer",
                 "If the two lists is empty", "when the bit strings is empty",
                 "Put the largest value first in the largest numbers."):
        assert template_slips(slip), slip
    assert not template_slips("If the list of numbers is empty, return None. The class is empty.")
    assert foreign_words("a blank batch is treated by curriculum design and grading standards", "P03")
    assert foreign_words("OK, give me something I can run.", "P04")
    assert foreign_words("Use the threshold the way my monitoring applies it.", "P08")
    assert not foreign_words("Use the threshold the way my monitoring applies it.", "P02")


def test_safe_swaps_name_terms_of_their_lexicon():
    lex = load_content().lexicons
    for lid, entities in same_meaning().items():
        for entity, nouns in entities.items():
            assert nouns <= {t.sg for t in lex[lid].terms[entity]}, (lid, entity)
    assert "number of" in kept_phrases()


def test_no_request_has_a_swap_gloss_template_or_persona_slip(sessions):
    bad = []
    for cell, ctx, mapping, r in sessions:
        texts = [r.initial_request] + [h.clarification for h in r.hidden_items]
        problems = swap_slips(r.initial_request, mapping) + gloss_slips(
            r.initial_request, [h.clarification for h in r.hidden_items], mapping)
        for t in texts:
            problems += template_slips(t) + foreign_words(t, cell.persona_id)
        if problems:
            bad.append((ctx.session_id, problems))
    assert not bad, bad[:5]


def test_a_task_item_is_never_obscured_by_a_back_reference(sessions):
    n = 0
    for _, ctx, _, r in sessions:
        for item, h in zip(ctx.plan.items, r.hidden_items):
            if item.kind == "task" and item.mechanism.operation == "deixis":
                n += 1
                assert h.obscured_as == item.keypoint.vague, (ctx.session_id, h.obscured_as)
    assert n > 0


def test_domain_cognitive_requests_still_use_field_nouns(sessions):
    dcp = [(ctx, m, r) for _, ctx, m, r in sessions if any(i.mechanism.operation == "lexicon" for i in ctx.plan.items)]
    swapped = [r for _, m, r in dcp if m.nouns]
    # a number stays a number in a task about numbers as numbers (lexicon_keep.yaml math_words), so
    # the swaps land in about one domain-cognitive request in eight (22 of 187 in the 0.3.1 design)
    assert dcp and len(swapped) >= len(dcp) // 10
    for _, m, r in dcp:
        for sg, pl in m.nouns.values():
            assert sg.lower() in r.initial_request.lower() or pl.lower() in r.initial_request.lower()


def test_a_persona_kit_uses_only_its_own_words():
    import yaml
    from capa_hf.generation.persona_voice import persona_voice
    from capa_hf.paths import DATA_DIR

    voice = persona_voice()
    assert voice.fields and set(voice.fields) == set(load_content().personas)
    for pid, persona in load_content().personas.items():
        kit = yaml.safe_dump(persona.voice.model_dump())
        assert not foreign_words(kit, pid), (pid, foreign_words(kit, pid))
    assert (DATA_DIR / "persona_voice.yaml").exists()


def test_the_goal_comes_before_the_details_it_sums_up(sessions):
    n = 0
    for _, ctx, mapping, r in sessions:
        req = r.initial_request.lower()
        gist = mapping.swap(ctx.content.gist)[0].strip().rstrip(".")
        at = req.find(gist[1:30].lower())
        assert at >= 0, (ctx.session_id, gist)
        for h in r.hidden_items:
            if h.obscured_as and h.obscured_as[1:20].lower() in req:
                n += 1
                assert at < req.find(h.obscured_as[1:20].lower()), (ctx.session_id, r.initial_request)
    assert n > 300


def test_validate_content_reports_a_kit_with_another_personas_words(monkeypatch):
    from capa_hf.validate_content import voice_errors

    content = load_content()
    assert voice_errors(content) == []
    p03 = content.personas["P03"]
    kit = p03.voice.model_copy(update={"closers": p03.voice.closers + ("ok, our curriculum grading pipeline is done",)})
    broken = type(content.personas)(content.personas)
    broken["P03"] = p03.model_copy(update={"voice": kit})
    errors = voice_errors(type("C", (), {"personas": broken, "lexicons": content.lexicons})())
    assert errors and "P03" in errors[0] and "curriculum" in errors[0]


# the second blind review's quotes (held-out sessions of the 0.3.0 candidate)
OPERATOR_QUOTES = ("Just run it on my data and tell me what you get.",
                   "Try it on my current dataset and tell me what you get.",
                   "You can see the verdict on my screen; work it out from there.",
                   "The data is sitting on my laptop; go through it and report what you get.",
                   "Have a look at my data and work out what the answer should be.",
                   "When there's nothing loaded on my side, handle it the normal way.",
                   "If the string on my side is empty, do what my other scripts do.",
                   "Peek at my workspace and you'll see what the sentences should be.")
FIELD_QUOTES = ("if the string comes in empty, do what's normally done in freight.",
                "Give the sorted quantities back in the kind of container logistics would use.",
                "Hand the letter grades back in the usual form for the warehouse.",
                "Number things the way you would in trading.",
                "Positions start where they start in clinical research.",
                "um an empty input gets the treatment it gets in my course.")


def test_the_second_reviews_slips_are_caught():
    for quote in OPERATOR_QUOTES:
        assert operator_slips(quote), quote
    for quote in FIELD_QUOTES:
        assert field_slips(quote), quote
    for quote in ("If the list of operations is empty, return the empty result rather than failing.",
                  "When the text is empty, give back the plain empty answer.",
                  "With nothing in the string to search, the result is the natural empty one, not an error."):
        assert empty_slips(quote, "bool") and empty_slips(quote, "zero"), quote
        assert not empty_slips(quote, "empty container"), quote
    # a habit speaks of every task, so its examples are no slip
    assert not empty_slips("On empty input I always want the natural empty answer back. Return False.", "bool")
    for quote in ("Have the largest numbers run from largest to smallest.",
                  "Order the largest numbers from largest to smallest.", "Task. The task, in short: undo it",
                  "Everybody on the team knows what the cleaned text and the palindrome verdict means here.",
                  "Package the picked quantities as it would be packaged in the warehouse."):
        assert template_slips(quote), quote
    for quote in ("Every term here means what it always means on our side.", "Nothing exotic: our standard definition.",
                  "same definition i always use for this kind of problem.", "Keep the words with about that many consonants."):
        assert stiff_slips(quote), quote
    for fine in ("Make it read the bit strings the way my export writes it.", "Work done in the lab last week",
                 "Count positions the way rows are counted in our freight manifests.",
                 "If the list is empty, return False rather than failing."):
        assert not (operator_slips(fine) + field_slips(fine) + empty_slips(fine, "bool") + stiff_slips(fine)), fine


def _family_lines():
    """Every phrase a convention's vague or state lines, or a solo persona's habits, can put into a request."""
    import yaml
    from capa_hf.paths import DATA_DIR

    out = []
    for dim in yaml.safe_load((DATA_DIR / "conventions.yaml").read_text())["dimensions"]:
        out += [(op, line) for op, lines in dim["vague"].items() for line in lines]
        out += [("state", line) for v in dim["values"] for line in v["state"]]
    voice = yaml.safe_load((DATA_DIR / "persona_voice.yaml").read_text())
    out += [("habitual", line) for lines in voice["solo_habitual"].values() for line in lines]
    return out


def test_no_family_line_asks_for_results_names_a_whole_field_or_reads_stiff():
    lines = _family_lines()
    assert len(lines) > 300
    bad = [(op, line) for op, line in lines if operator_slips(line) or stiff_slips(line) or template_slips(line)
           or "{discipline}" in line]
    assert not bad, bad


def test_no_request_has_an_operator_field_empty_or_stiff_slip(sessions):
    """Over all 600 requests and their clarifications; a keypoint's own vague line (curated per
    task in keypoints/*.yaml) is left to the data test of its own file."""
    from capa_hf.generation.empty_results import empty_kinds

    kinds = empty_kinds()
    bad = []
    for cell, ctx, _, r in sessions:
        own = [k.vague for k in ctx.content.keypoints]
        texts = [r.initial_request.replace(r.opener, "", 1)] + [h.clarification for h in r.hidden_items]
        for t in texts:
            for line in own:
                t = t.replace(line, "").replace(line[:1].lower() + line[1:], "")
            problems = (operator_slips(t) + field_slips(t) + stiff_slips(t) + template_slips(t)
                        + empty_slips(t, kinds.get(ctx.plan.task_id)))
            if problems:
                bad.append((ctx.session_id, problems))
    assert not bad, bad[:5]


def test_a_field_practice_stands_in_only_for_the_dimensions_it_settles():
    from capa_hf.generation.persona_voice import persona_voice

    voice = persona_voice()
    assert set(voice.practices) == set(load_content().personas)
    assert voice.practice("P02", "indexing") == "our freight manifests"
    assert voice.practice("P02", "case") is None      # freight manifests settle no letter case


def test_the_neutral_empty_case_names_a_bool_number_or_string_result():
    from capa_hf.generation.empty_results import neutral_state_forms

    assert any("return False" in f for f in neutral_state_forms("HumanEval/3"))
    assert any("return 0" in f for f in neutral_state_forms("HumanEval/23"))
    assert any("an empty string" in f for f in neutral_state_forms("HumanEval/10"))
    assert neutral_state_forms("HumanEval/1") == ()           # an empty container: the dimension's lines
    assert not any("1" in f for f in neutral_state_forms("HumanEval/18"))   # two empty strings give 1


def test_a_number_stays_a_number_in_a_task_about_numbers():
    from capa_hf.generation.stage1_lexicon import math_kept
    assert math_kept(["number", "maximum"], "Count the numbers that are palindromes.") == ["maximum"]
    assert math_kept(["number"], "Return the even numbers of the list.") == []
    assert math_kept(["number", "maximum"], "Add up the numbers of a list.") == ["number", "maximum"]


def test_no_domain_cognitive_request_swaps_a_number_in_a_task_about_numbers(sessions):
    from capa_hf.generation.stage1_lexicon import math_kept
    for _, ctx, m, r in sessions:
        text = " ".join([ctx.content.gist, *(k.description for k in ctx.content.keypoints)])
        if "number" in m.nouns:
            assert math_kept(["number"], text) == ["number"], (ctx.session_id, r.initial_request)


def test_a_gloss_follows_the_answer_about_the_sentence_that_used_the_field_noun():
    from types import SimpleNamespace as NS

    from capa_hf.generation.stage1_realize import gloss_owners
    lex, hab = NS(mechanism=NS(operation="lexicon")), NS(mechanism=NS(operation="habitual"))
    items = [hab, lex, lex]
    obscured = {0: "Do it our way.", 1: "Return the usual kind of sequence.", 2: "Total the quantities."}
    assert gloss_owners(items, obscured, [("quantity", "number")]) == {("quantity", "number"): 2}
    assert gloss_owners(items, obscured, [("peak", "maximum")]) == {("peak", "maximum"): 1}


def test_at_most_two_appeals_stand_in_one_request(sessions):
    from capa_hf.generation.stage1_realize import MAX_APPEALS, is_appeal
    for _, ctx, _, r in sessions:
        said = [h for item, h in zip(ctx.plan.items, r.hidden_items) if is_appeal(item) and h.obscured_as]
        assert len(said) <= MAX_APPEALS, (ctx.session_id, [h.obscured_as for h in said])


def test_an_article_before_a_filled_noun_phrase_is_a_template_slip():
    # the 0.3.1 candidate's "Watch what an empty {input} gives back." with {input} = "the string"
    assert template_slips("Be careful about what comes back for an empty the string.")
    assert not template_slips("Be careful about what to return when the string is empty.")
