"""Stage 3 checks of the dialogue: failure reports joined into broken sentences, questions about
a signature keypoint that another keypoint settles, and the reaction slot that needs a noun phrase."""

from capa_hf.content import load_task_contents, load_user_lines
from capa_hf.generation.stage3_checks import check_answers, check_joins
from capa_hf.simulator.reply_lines import slot_role
from capa_hf.simulator.user_data import ask_fits, names_other_item

FORMS = [f for forms in load_user_lines()["what_happened"].values() for f in forms]


def _user(text):
    return [{"role": "assistant", "content": "code"}, {"role": "user", "content": text}]


def test_joined_failure_reports_fail_the_check():
    for text in ("It fails with the result is wrong at `assert f(8) == True`. Can you patch it?",
                 "The output failed with the check `assert f(33, 1) == 2` gets a different result.",
                 "Got the check `assert f([5]) == -1` gets a different result when I ran it.",
                 "It fails with `assert f(0) == (1, 0)` does not hold."):
        r = check_joins(_user(text), FORMS)
        assert not r.ok and "turn 2" in r.detail, text


def test_well_formed_failure_reports_pass():
    for text in ("It fails with the failing check `assert f(8) == True`. Can you patch it?",
                 "Nope, the check `assert f(1) == 2` gets a different result.",
                 "Straight with you: the result is wrong at `assert f(1) == 2`.",
                 "it raised ValueError at `assert f([]) == 0`"):
        assert check_joins(_user(text), FORMS).ok, text


def test_slot_after_a_preposition_or_object_verb_takes_a_noun_phrase():
    assert slot_role("It fails with {error}. Can you keep what you have?") == "subject"
    assert slot_role("Got {error} when I ran it.") == "subject"
    assert slot_role("Failing on {error}. I'll take any version.") == "subject"
    assert slot_role("{error} tells me the design is off.") == "subject"
    assert slot_role("uhh {error} did i copy it wrong??") == "clause"
    assert slot_role("That fails: {error}.") == "plain"


def test_count_question_on_the_signature_keypoint_names_the_counting_keypoint():
    kps = load_task_contents()["HumanEval/115"].keypoints
    assert names_other_item("Should the answer be one total, or a count for each well?",
                            "HumanEval/115", "kp_01", kps) == "kp_02"
    assert names_other_item("What are the inputs, in which order, and what should it return?",
                            "HumanEval/115", "kp_01", kps) is None
    assert not ask_fits("HumanEval/115", "kp_01", kps)
    assert ask_fits("HumanEval/115", "kp_02", kps)       # not a signature keypoint: not tested


def test_answers_asked_fails_an_off_item_question():
    q = "One question: Should the answer be one total, or a count for each well?"
    turns = [{"role": "user", "content": "req"}, {"role": "assistant", "content": q},
             {"role": "user", "content": "It takes the grid first and returns an integer."}]
    asks = [("It takes the grid first and returns an integer.", q)]
    assert check_answers(turns, asks).ok
    r = check_answers(turns, asks, {q: "kp_02"})
    assert not r.ok and "kp_02" in r.detail
