"""The scripted user reveals one item per turn (one per part of a several-part question), never sends code, never repeats or takes back."""

import re

from capa_hf.simulator.planner import PlannerItem, plan_next
from capa_hf.simulator.scripted_user import ScriptedUser, UserScript

ITEMS = (
    PlannerItem("h1", "What types go in and what comes out?", "It takes a list of integers and returns a bool.",
                "l: list) -> bool"),
    PlannerItem("h2", "Is the comparison strict, below or equal to the threshold?",
                "Two values count as close when their gap is strictly below the threshold.",
                "closer to each other than given threshold"),
    PlannerItem("h3", "What should happen for an empty list?", "An empty list gives False.", "empty list"),
)
CLAR = {"h1": "Right: It takes a list of integers and returns a bool.",
        "h2": "To be exact: Two values count as close when their gap is strictly below the threshold.",
        "h3": "Oh and: An empty list gives False."}


def make_user(reactions=("Ugh, {error}.", "Nope: {error}", "Still wrong ({error}).", "Broken again.")):
    return ScriptedUser(UserScript(session_id="C01-S06", items=ITEMS, clarifications=CLAR,
                                   failure_reactions=reactions,
                                   failing_check=("This fails: `{line}`.", "Look at `{line}`."),
                                   nothing_left=("That's all I know.", "Nothing more to add.", "I said it all.")))


def say(user, reply, verdict=None):
    gen = user.respond(reply, verdict)
    try:
        next(gen)
    except StopIteration as stop:
        return stop.value
    raise AssertionError("the scripted user must not call a model")


FAIL = {"status": "failed", "failure": {"type": "AssertionError", "message": "",
                                        "line": "assert candidate([1.0, 2.0], 0.5) == False"}}


def test_question_reveals_best_matching_item():
    user = make_user()
    msg = say(user, "Quick check: for an empty list, what should happen?")
    assert msg == CLAR["h3"] and user.revealed == ["h3"]


def test_unmatched_reply_reveals_next_by_priority():
    user = make_user()
    assert say(user, "Hello! Happy to help.") == CLAR["h1"]
    assert say(user, "Great, thanks.") == CLAR["h2"]


def test_failure_tied_to_no_hidden_item_reacts_in_persona_and_quotes_the_check():
    user = make_user()
    say(user, "Is the comparison strict or not, relative to the threshold?")
    msg = say(user, "```python\ndef f(l): ...\n```", FAIL)
    assert user.revealed == ["h2"]                                 # nothing new is revealed
    # the reaction quotes the check, so the line is not quoted a second time
    assert msg.count("assert candidate([1.0, 2.0], 0.5) == False") == 1
    assert user.log[-1]["basis"] == "failing_check"


def test_failure_without_a_line_reveals_next_by_priority():
    user = make_user()
    msg = say(user, "```python\ndef f(l): ...\n```", {"status": "timeout", "failure": {"type": "Timeout",
                                                                                       "message": "", "line": None}})
    assert msg.endswith(CLAR["h1"]) and user.log[-1]["basis"] == "priority"


def test_after_everything_is_revealed_it_quotes_the_failing_check():
    user = make_user()
    for _ in range(3):
        say(user, "hmm?")
    msg = say(user, "code", FAIL)
    assert "`assert candidate([1.0, 2.0], 0.5) == False`" in msg


def test_one_item_per_turn_never_repeats_never_contradicts_never_code():
    user = make_user()
    replies = ["What types?", "What about empty?", "Strict or not?", "ok", "ok?", "and?", "so?"]
    verdicts = [None, None, FAIL, FAIL, None, FAIL, FAIL]
    messages = [say(user, r, v) for r, v in zip(replies, verdicts)]
    assert [e["basis"] for e in user.log] == ["question", "question", "failing_check", "failing_check",
                                              "priority", "failing_check", "failing_check"]
    assert len(set(messages)) == len(messages)                      # never repeats a message
    assert len(user.revealed) == len(set(user.revealed)) == 3       # each item at most once
    for m in messages:
        assert sum(c in m for c in CLAR.values()) <= 1              # one item per turn
        assert "```" not in m and not re.search(r"\bdef \w+\(", m)  # never sends code
        assert "return " not in m


def test_planner_is_pure():
    a = plan_next(ITEMS, frozenset(), "empty input?", after_failure=False, has_failing_line=False)
    b = plan_next(ITEMS, frozenset(), "empty input?", after_failure=False, has_failing_line=False)
    assert a == b and a.item_id == "h3"
    c = plan_next(ITEMS, frozenset({"h1", "h2", "h3"}), "x", after_failure=False, has_failing_line=False)
    assert c.kind == "nothing_left"


def test_a_question_in_two_parts_gets_both_parts_answered():
    user = make_user()
    msg = say(user, "Is the comparison strict or not, relative to the threshold, and what should an empty list give?")
    assert user.revealed == ["h2", "h3"] and user.log[-1]["parts"] == ["h2", "h3"]
    assert msg == f"{CLAR['h2']} {CLAR['h3']}"
