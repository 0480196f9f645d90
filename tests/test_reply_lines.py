"""The scripted user's reply assembly: several-part questions, lead-ins, failure slots, concessions."""

from capa_hf.generation.stage3_checks import check_answers
from capa_hf.simulator.question_match import question_parts
from capa_hf.simulator.reply_lines import answered, end_sentence, fill_error, join_answers, made_move


def test_a_question_in_two_parts_splits_where_the_second_question_starts():
    assert question_parts("Should trailing spaces be stripped first, and what happens with an empty string?") == [
        "Should trailing spaces be stripped first", "what happens with an empty string?"]
    assert question_parts("Is it a or b?") == ["Is it a or b?"]
    assert question_parts("Noted. Both readings work.") == []


def test_joined_answers_keep_one_lead_in_and_each_answer_still_counts_as_given():
    a = "As it has always worked here: I number everything from one. Positions are counted from one."
    b = "As it has always worked here: Square each entry whose position is a multiple of 3."
    joined = join_answers([a, b])
    assert joined.count("As it has always worked here") == 1
    assert answered(a, joined) and answered(b, joined)
    assert not answered(b, a)        # the shared lead-in alone is no answer


def test_failure_slot_fits_where_it_stands():
    assert fill_error("it broke: {error} fix pls", "`x` does not hold") == "it broke: `x` does not hold, fix pls"
    assert fill_error("No. {error} Ask why.", "`x` does not hold") == "No. `x` does not hold. Ask why."
    assert fill_error("{error}? Then it is wrong.", "the check `x` fails").startswith("The check")
    assert fill_error("{error} ??? just fix it", "the check `x` fails").startswith("the check")
    assert end_sentence("failed, i dont have time for this") == "failed, i dont have time for this."


def test_a_concession_needs_the_assistant_move():
    cues = ["can't see", "can't open"]
    assert made_move("I can't open anything on your machine. Which order?", cues)
    assert not made_move("Which order do you want?", cues)


def test_check_answers_flags_a_repeated_question_and_an_answer_to_another_item():
    asks = (("Positions start at zero.", "Is indexing 0-based?"), ("Odd positions only.", "Which positions?"))
    turns = [{"role": "user", "content": "req"}, {"role": "assistant", "content": "Which positions?"},
             {"role": "user", "content": "Positions start at zero."},
             {"role": "assistant", "content": "Which positions?"}, {"role": "user", "content": "Odd positions only."}]
    res = check_answers(turns, asks)
    assert not res.ok and "repeats" in res.detail and "does not answer" in res.detail
    good = turns[:2] + [{"role": "user", "content": "Odd positions only."}]
    assert check_answers(good, asks).ok
