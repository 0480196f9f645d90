"""A condition, a simulated user, a judge, an engine and a task source, each registered here (as a
plug-in package would, through its entry point) and run through `capa eval`, with no edit to any
CAPA file."""
from __future__ import annotations

import json

import pytest
from runners import register_engine
from runners.registry import unregister_engine
from runners.scripted import ScriptedEngine

from capa_hf.cli import main
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import CONDITIONS
from capa_hf.evaluation.sources import SOURCES, Target
from capa_hf.simulator.brief import UserBrief
from capa_hf.simulator.problem import Problem
from capa_hf.simulator.protocols import JUDGES, USERS

TEST = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
HINT = "Numbers are always added."


class ToySource:
    """Two sessions of one toy task: write `add`."""

    splits = ("toy",)
    data = None

    def __init__(self, config, data=None):
        self.config = config

    def identity(self):
        return {"dataset_source": "toy", "dataset_version": "toy 1", "dataset_manifest_sha256": "0" * 64}

    def targets(self):
        problem = Problem(task_id="toy/add", variant_id="toy/add", entry_point="add", test=TEST, prelude="",
                          reference="def add(a, b):\n    return a + b\n")
        return [Target(session_id=f"toy/{i}", problem=problem, initial_request="Write add(a, b).",
                       brief=UserBrief(session_id=f"toy/{i}", hidden_items=(), keypoints={}, dimensions={},
                                       persona=None, user_lines={}),
                       facts={"session_id": f"toy/{i}", "task_id": "toy/add", "cell_id": None, "persona_id": None,
                              "mechanisms": [], "role": None, "item_kinds": [], "fully_resolvable": None})
                for i in (1, 2)]


class Hinted:
    name = "hinted"

    def __init__(self, seed=0):
        self.seed = seed

    def contexts(self, targets, data, env=None):
        return {t.session_id: {"text": HINT, "sources": ["a note"]} for t in targets}


class Terse:
    name = "terse"

    def __init__(self):
        self.revealed = []

    def respond(self, assistant_reply, verdict):
        return "Not yet." if verdict is None or verdict.get("status") != "passed" else "Thanks."
        yield  # pragma: no cover


class ReturnsSomething:
    """A judge that passes any code with a return statement (a stand-in for a cheaper check)."""

    name = "returns"

    def judge(self, submission, problem):
        return {"status": "passed" if "return" in submission.code else "failed", "failure": None}
        yield  # pragma: no cover

    def describe(self):
        return {"layers": [], "judge": "returns"}

    def close(self):
        pass


def canned(arg, **options):
    """Engine `canned:<first>`: replies `first` (right or wrong) first, then the right code; the
    system message it saw is kept."""
    seen = []

    def reply(messages):
        seen.append(messages[0]["content"])
        first = sum(m["role"] == "assistant" for m in messages) == 0
        return (WRONG if arg == "wrong" else RIGHT) if first else RIGHT

    engine = ScriptedEngine(fn=reply, model=f"canned-{arg}")
    engine.system_seen = seen
    CANNED.append(engine)
    return engine


CANNED: list = []


@pytest.fixture(autouse=True)
def plugins():
    SOURCES.register("toy", ToySource)
    CONDITIONS.register("hinted", Hinted)
    USERS.register("terse", lambda brief, **options: Terse())
    JUDGES.register("returns", lambda **options: ReturnsSomething())
    register_engine("canned", canned, lambda: [])
    CANNED.clear()
    yield
    for registry, name in ((SOURCES, "toy"), (CONDITIONS, "hinted"), (USERS, "terse"), (JUDGES, "returns")):
        registry.unregister(name)
    unregister_engine("canned")


def capa_eval(tmp_path, *flags):
    out = tmp_path / "run"
    rc = main(["eval", "--out", str(out), "--no-progress", *flags])
    recs = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    return rc, recs, json.loads((out / "config.json").read_text()), json.loads((out / "summary.json").read_text())


BASE = ("--split", "toy", "--user", "debugger", "--condition", "blank-control")


def test_a_registered_task_source_runs(tmp_path):
    rc, recs, config, summary = capa_eval(tmp_path, "--model", "canned:right", *BASE)
    assert rc == 0 and [r["session_id"] for r in recs] == ["toy/1", "toy/2"]
    assert config["dataset_source"] == "toy" and config["n_targets"] == 2
    assert all(r["success_turn"] == 1 for r in recs) and summary["overall"]["FT-ES"]["value"] == 1.0


def test_a_registered_engine_runs(tmp_path):
    rc, recs, config, summary = capa_eval(tmp_path, "--model", "canned:wrong", *BASE)
    assert config["engine"]["model"] == "canned-wrong" and len(CANNED) == 1
    # the wrong first reply fails in the sandbox, the debugger quotes the check, the fix passes
    assert [s["verdict"]["status"] for s in recs[0]["submissions"]] == ["failed", "passed"]
    assert recs[0]["success_turn"] == 2


def test_a_registered_condition_runs(tmp_path):
    rc, recs, *_ = capa_eval(tmp_path, "--model", "canned:right", "--split", "toy", "--user", "debugger",
                             "--condition", "hinted")
    assert recs[0]["condition"] == "hinted" and recs[0]["context_chars"] == len(HINT)
    assert recs[0]["context_sources"] == ["a note"]
    assert all(system.endswith(HINT) for system in CANNED[0].system_seen)


def test_a_registered_user_runs(tmp_path):
    rc, recs, config, _ = capa_eval(tmp_path, "--model", "canned:wrong", "--split", "toy", "--user", "terse",
                                    "--condition", "blank-control")
    assert config["run"]["user"] == "terse"
    assert recs[0]["turns"][2]["role"] == "user" and recs[0]["turns"][2]["content"] == "Not yet."


def test_a_registered_judge_runs(tmp_path):
    rc, recs, config, summary = capa_eval(tmp_path, "--model", "canned:wrong", *BASE, "--judge", "returns")
    assert config["run"]["judge"] == "returns" and summary["sandbox"] == {"layers": [], "judge": "returns"}
    # the wrong code has a return statement: this judge passes it at turn 1, the sandbox would not
    assert [s["verdict"]["status"] for s in recs[0]["submissions"]] == ["passed"]


def test_the_veto_wraps_a_registered_judge(tmp_path):
    def verdict(messages):
        wrong = "a - b" in messages[-1]["content"]
        return json.dumps({"functionally_equivalent": not wrong, "reason": "subtracts" if wrong else "adds"})

    register_engine("verdicts", lambda arg, **options: ScriptedEngine(fn=verdict, model="verdicts"), lambda: [])
    try:
        rc, recs, config, summary = capa_eval(tmp_path, "--model", "canned:wrong", *BASE, "--judge", "veto:returns",
                                              "--judge-model", "verdicts")
    finally:
        unregister_engine("verdicts")
    assert (config["run"]["judge"], config["run"]["judge_model"]) == ("veto:returns", "verdicts")
    # `returns` passes the wrong code, the veto turns that pass into `vetoed`; the fix passes both
    assert [s["verdict"]["status"] for s in recs[0]["submissions"]] == ["vetoed", "passed"]
    assert recs[0]["submissions"][0]["verdict"]["veto"]["reason"] == "subtracts"
    assert summary["veto"]["vetoed"] == 2 and summary["veto"]["passes_assessed"] == 4
    assert summary["sandbox"] == {"layers": [], "judge": "returns"}


def test_an_unknown_part_is_refused_with_the_known_ones(tmp_path, capsys):
    rc = main(["eval", "--out", str(tmp_path / "x"), "--model", "canned:right", *BASE, "--judge", "nope"])
    err = capsys.readouterr().err
    assert rc != 0 and "unknown judge 'nope'; expected one of returns, sandbox, veto" in err
    with pytest.raises(CapaError, match="registered twice"):
        JUDGES.register("returns", lambda **options: None)


def test_a_plug_in_package_adds_a_part_through_its_entry_point(monkeypatch):
    from importlib.metadata import EntryPoint

    import capa_hf.registry as registry

    eps = [EntryPoint("hinted-too", "tests.test_plugins:Hinted", "capa.conditions"),
           EntryPoint("broken", "tests.no_such_module:X", "capa.conditions")]
    monkeypatch.setattr(registry, "entry_points", lambda group: [e for e in eps if e.group == group])
    parts = registry.Registry("condition", "capa.conditions", builtins=("capa_hf.evaluation.conditions.blank",))
    with pytest.raises(CapaError, match="plug-in 'broken'.*failed to load"):
        parts.names()
    eps.pop()
    parts = registry.Registry("condition", "capa.conditions")
    assert parts.names() == ["hinted-too"] and parts.get("hinted-too") is Hinted


class FailsAll:
    """A judge that fails every submission without running it."""

    name = "fails"

    def judge(self, submission, problem):
        return {"status": "failed", "failure": {"type": "AssertionError", "message": "", "line": None}}
        yield  # pragma: no cover

    def describe(self):
        return None

    def close(self):
        pass


def test_the_fidelity_check_takes_its_judge_from_the_registry(capa_data):
    from capa_hf.content import load_user_lines
    from capa_hf.user_fidelity import humaneval_behaviour_reveals

    lines = load_user_lines()
    passing = humaneval_behaviour_reveals(capa_data, lines, judge_spec="returns")   # HumanEval's code returns
    assert passing.sessions == 0 and passing.passed > 0
    JUDGES.register("fails", lambda **options: FailsAll())
    try:
        failing = humaneval_behaviour_reveals(capa_data, lines, judge_spec="fails")
    finally:
        JUDGES.unregister("fails")
    assert failing.passed == 0 and failing.sessions == passing.passed     # the same submissions, now failed
    with pytest.raises(CapaError, match="asks a model for its verdict; the user fidelity check never calls one"):
        humaneval_behaviour_reveals(capa_data, lines, judge_spec="veto:returns")


def test_the_dataset_build_takes_its_judge_from_the_registry():
    import inspect

    from capa_hf.defaults import JUDGE
    from capa_hf.generation.pipeline import generate, stage2_judge

    assert inspect.signature(generate).parameters["judge"].default == JUDGE
    with stage2_judge("returns") as (judge, pool):
        assert isinstance(judge, ReturnsSomething) and hasattr(pool, "check")   # examples get a pool of their own
    with pytest.raises(CapaError, match="judge 'veto' asks a model"):
        with stage2_judge("veto"):
            pass


def test_a_judge_whose_verdict_has_no_status_leaves_the_session_incomplete_naming_the_field(tmp_path):
    JUDGES.register("sloppy", lambda **options: SloppyJudge())
    try:
        rc, recs, _, summary = capa_eval(tmp_path, "--model", "canned:right", *BASE, "--judge", "sloppy",
                                         "--max-errors", "5")
    finally:
        JUDGES.unregister("sloppy")
    assert rc == 1 and all(r["incomplete"] for r in recs) and summary["n_incomplete"] == 2
    assert summary["incomplete"][0]["error"] == ("ValueError: session toy/1: no valid record (judge 'sloppy', user "
                                                 "'debugger'): submissions.0.verdict.status: Field required")


class SloppyJudge(FailsAll):
    name = "sloppy"

    def judge(self, submission, problem):
        return {"ok": True}
        yield  # pragma: no cover
