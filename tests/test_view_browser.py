"""`capa view` in a real headless Chromium (Debian's chromium + chromium-driver, which `make test`
installs): the page opens from disk, the filters narrow the list, a click opens a session, and
the chat shows what the runs recorded, two runs side by side."""

from __future__ import annotations

import json

import pytest

from capa_hf.cli import main
from capa_hf.evaluation.config import EvalConfig
from capa_hf.evaluation.records import read_contexts
from capa_hf.evaluation.run import run_eval
from capa_hf.prompts import prompt_text
from tests.webdriver import Browser

HOSTILE = "<img id=injected src=x onerror=\"document.title='owned'\">"


@pytest.fixture(scope="module")
def viewer(tmp_path_factory, capa_data):
    """Four real runs on C01's first two held-out sessions, and their viewer."""
    from runners import ScriptedEngine

    root = tmp_path_factory.mktemp("view")
    runs = {"ask-none": ("reference:asker", "none"), "ask-same": ("reference:asker", "same-user"),
            "he-none": ("reference:humaneval", "none")}
    for name, (model, condition) in runs.items():
        run_eval(EvalConfig(model=model, condition=condition, cells=("C01",), limit=2), root / name,
                 data=capa_data, progress=False)
    run_eval(EvalConfig(model="scripted", condition="none", cells=("C01",), limit=1, max_turns=2),
             root / "hostile", engine=ScriptedEngine(default=HOSTILE), data=capa_data, progress=False)
    out = root / "site"
    assert main(["view", *(str(root / n) for n in (*runs, "hostile")), "--out", str(out)]) == 0
    return root, out


@pytest.fixture(scope="module")
def browser():
    with Browser(1400, 1000) as b:
        yield b


def shown_rows(b):
    return b.script("return [...document.querySelectorAll('#session-table tbody tr')].map(r => "
                    "[...r.children].map(c => c.textContent));")


def test_the_list_filters_and_a_click_opens_the_session(viewer, browser, capa_data):
    root, out = viewer
    b = browser
    b.open((out / "index.html").as_uri())
    assert b.text("#count") == "7 of 7 session records"
    assert [r[0] for r in b.script("return [...document.querySelectorAll('#runs tbody tr')]"
                                   ".map(r => [r.children[0].textContent]);")] == [
        "ask-none", "ask-same", "he-none", "hostile"]

    b.choose("#filter-condition", "same-user")
    rows = shown_rows(b)
    assert b.text("#count") == "2 of 7 session records"
    assert {r[1] for r in rows} == {"same-user"} and {r[0] for r in rows} == {"ask-same"}

    b.click("#filter-reset")
    b.choose("#filter-solved", "no")
    rows = shown_rows(b)
    assert {r[0] for r in rows} == {"he-none", "hostile"} and {r[7] for r in rows} == {"no"}
    b.choose("#filter-run", "he-none")
    assert len(shown_rows(b)) == 2

    b.click("#filter-reset")
    target = capa_data.heldout[shown_rows(b)[0][2].split("#")[0]]
    b.choose("#filter-persona", target.persona_id)
    b.choose("#filter-mechanism", target.mechanisms[0])
    b.choose("#filter-turns", str(len(target.hidden_items) + 1))   # the asker: one question per item
    b.choose("#filter-solved", "yes")     # a run that never solves can end after as many turns
    rows = shown_rows(b)
    assert rows and all(r[3] == target.persona_id and target.mechanisms[0] in r[4] for r in rows)
    assert {r[0] for r in rows} == {"ask-none", "ask-same"}

    b.click('#session-table tbody tr[data-run="0"]')
    assert b.script("return document.getElementById('list-view').hidden") is True
    assert b.text("#session-head h2") == f"{target.session_id}#0"
    # beside it by default: the first other run that played this session
    assert b.texts(".column h3") == ["ask-none: none", "ask-same: same-user"]


def test_the_chat_shows_context_reveals_and_verdicts(viewer, browser, capa_data):
    root, out = viewer
    b = browser
    rec = json.loads((root / "ask-none" / "sessions.jsonl").read_text().splitlines()[0])
    session = capa_data.heldout[rec["session_id"]]
    b.open((out / "index.html").as_uri() + f"#s={rec['session_id']}%230&r=0&c=1")

    # the hidden items, once, with the turn each run's user revealed them
    items = b.texts("table.hidden-items tbody tr")
    assert len(items) == len(session.hidden_items)
    for h, row in zip(session.hidden_items, items):
        assert row.startswith(h.id) and h.clarification in row
    assert b.texts('td.revealed-at[data-run="0"]') == [f"after turn {t}" for t in range(1, len(items) + 1)]

    # the context the model saw: the system prompt, and for same-user the history too
    left, right = b.find_all(".column")
    b.click('.column[data-run="0"] details.context summary')
    context = b.text('.column[data-run="0"] pre.context-text')
    assert context.startswith(prompt_text("assistant_system").strip()[:60])
    stored = read_contexts(root / "ask-same" / "contexts.jsonl")
    assert len(stored) == 1                                  # one cell's history: one stored copy
    summary = b.text('.column[data-run="1"] details.context summary')
    assert f"({len(next(iter(stored.values())))} chars; from C01-S01" in summary

    # each reveal is marked on the user's message, the clarification highlighted
    marks = b.texts('.column[data-run="0"] .msg.user.reveal mark.clarification')
    assert marks == [h.clarification for h in session.hidden_items]
    assert b.texts('.column[data-run="0"] .submission .verdict b') == [
        f"submission, turn {len(items) + 1}: passed"]
    assert "binding: entry_point" in b.text('.column[data-run="0"] .submission .extraction')

    # a failing submission names its failing check
    b.choose("#compare-select", "2")
    assert b.texts(".column h3") == ["ask-none: none", "he-none: none"]
    fails = b.texts('.column[data-run="2"] .submission .verdict b')
    assert fails and all(f.endswith(": failed") for f in fails)
    first = rec_of(root / "he-none", rec["session_id"])["submissions"][0]["verdict"]["failure"]
    assert first["type"] in b.text('.column[data-run="2"] .submission .failing-check')
    assert b.text('.column[data-run="2"] .outcome') == f"not solved in {session_turns(root / 'he-none', rec)} turns"

    # one run alone
    b.choose("#compare-select", "")
    assert len(b.find_all(".column")) == 1


def test_text_from_a_run_is_shown_as_text(viewer, browser):
    root, out = viewer
    b = browser
    key = json.loads((root / "hostile" / "sessions.jsonl").read_text())["session_id"]
    b.open((out / "index.html").as_uri() + f"#s={key}%230&r=3")
    assert HOSTILE in b.texts(".column .msg.assistant .text")
    assert b.find_all("#injected") == [] and b.script("return document.title") == "CAPA transcripts"


def rec_of(run, session_id):
    return next(json.loads(line) for line in (run / "sessions.jsonl").read_text().splitlines()
                if json.loads(line)["session_id"] == session_id)


def session_turns(run, rec):
    return rec_of(run, rec["session_id"])["assistant_turns"]
