"""`capa extract-keypoints`: drafts in the curated schema, refused when not verbatim, from an
example, too few, or malformed; whitespace-only differences repaired; played by scripted engines."""

import json

import pytest
import yaml
from runners.scripted import ScriptedEngine

from capa_hf.cli import main
from capa_hf.content import load_content
from capa_hf.errors import CapaError
from capa_hf.humaneval import load_tasks
from capa_hf.keypoint_extraction import (REPORT, SourceTask, check_draft, example_spans, extract_keypoints,
                                         read_source)
from capa_hf.prompts import prompt_text
from capa_hf.schema import TaskContent

TID = "HumanEval/0"


@pytest.fixture(scope="module")
def task():
    t = load_tasks()[TID]
    return SourceTask(t.task_id, t.prompt, t.entry_point)


@pytest.fixture(scope="module")
def curated():
    return load_content().tasks[TID].model_dump()


def engine_for(replies_by_task):
    """Replies per task id (a list is used in turn: first answer, then the retry's)."""
    pending = {k: list(v) if isinstance(v, list) else [v] for k, v in replies_by_task.items()}

    def reply(req):
        assert req.messages[0][1] == prompt_text("extract_keypoints_system")
        tid = next(t for t in pending if f"TASK {t} " in req.messages[1][1])
        answers = pending[tid]
        return answers.pop(0) if len(answers) > 1 else answers[0]
    return ScriptedEngine(request_fn=reply, model="extractor")


def with_kp(curated, n, **changes):
    draft = {"gist": curated["gist"], "keypoints": [dict(k) for k in curated["keypoints"]]}
    draft["keypoints"][n].update(changes)
    return json.dumps(draft)


def test_a_curated_answer_round_trips_into_the_same_yaml(tmp_path, task, curated):
    report = extract_keypoints([task], engine_for({TID: json.dumps(curated)}), tmp_path, progress=False)
    assert report["refused"] == [] and report["written"] == [str(tmp_path / "HumanEval_0.yaml")]
    written = yaml.safe_load((tmp_path / "HumanEval_0.yaml").read_text())
    assert TaskContent(**written).model_dump() == curated
    assert json.loads((tmp_path / REPORT).read_text())["written"] == report["written"]


def test_a_non_verbatim_original_text_is_sent_back_once_then_refused(tmp_path, task, curated):
    bad = with_kp(curated, 1, original_text="two numbers that sit close together")
    engine = engine_for({TID: bad})
    report = extract_keypoints([task], engine, tmp_path, progress=False)
    assert not (tmp_path / "HumanEval_0.yaml").exists()
    (refused,) = report["refused"]
    assert refused["task_id"] == TID and "kp_02: original_text is not verbatim in the prompt" in refused["reason"]
    assert engine.requests_served == 2
    assert "original_text is not verbatim" in engine.seen[1].messages[-1][1]   # the retry names the problem


def test_a_corrected_second_answer_is_written(tmp_path, task, curated):
    bad = with_kp(curated, 1, original_text="two numbers that sit close together")
    report = extract_keypoints([task], engine_for({TID: [bad, json.dumps(curated)]}), tmp_path, progress=False)
    assert report["refused"] == [] and len(report["written"]) == 1


@pytest.mark.parametrize("original,why", [
    (">>> has_close_elements([1.0, 2.0, 3.0], 0.5)", "example or doctest"),
    ("    True\n", "example or doctest"),              # a doctest's output line
    ("has_close_elements", "function name itself"),
])
def test_examples_doctests_and_the_name_are_refused(task, curated, original, why):
    value = json.loads(with_kp(curated, 0, original_text=original))
    draft, problems, _ = check_draft(value, task)
    assert draft is None and any(why in p for p in problems), problems


def test_whitespace_differences_are_repaired_to_the_prompts_own_text(task, curated):
    value = json.loads(with_kp(curated, 1, original_text="closer to each other than given threshold"))
    draft, problems, repairs = check_draft(value, task)
    assert problems == [] and repairs and draft["keypoints"][1]["original_text"] == "closer to each other than\n    given threshold"


@pytest.mark.parametrize("change,why", [
    ({"keypoints": "many"}, '"keypoints" must be a list'),
    ({"gist": ""}, '"gist" must be a non-empty string'),
])
def test_malformed_drafts_name_the_field(task, curated, change, why):
    draft, problems, _ = check_draft({**curated, **change}, task)
    assert draft is None and why in problems


def test_counts_categories_and_ids_are_checked(task, curated):
    one = {"gist": "x", "keypoints": list(curated["keypoints"][:1])}
    assert "1 keypoints (expected 2-8)" in check_draft(one, task)[1]
    wrong_cat = json.loads(with_kp(curated, 0, category="type"))
    assert any("kp_01: category" in p for p in check_draft(wrong_cat, task)[1])
    dup = {"gist": "x", "keypoints": [curated["keypoints"][0], curated["keypoints"][0]]}
    small = SourceTask("X/1", 'def f(x):\n    """Return True when x is above 10."""\n', "f")
    kp = {"category": "boundary_condition", "description": "d", "plain": "p", "question": "q?"}
    tight = {"gist": "g", "keypoints": [{**kp, "id": "kp_01", "original_text": "x is above 10", "vague": "past 10 or so"},
                                        {**kp, "id": "kp_02", "original_text": "Return True", "vague": "say yes"}]}
    assert check_draft(tight, small)[1] == ["kp_01: vague repeats literal(s) ['10'] of original_text"]
    assert any("ids repeat" in p for p in check_draft(dup, task)[1])
    missing = json.loads(with_kp(curated, 2))
    del missing["keypoints"][2]["question"]
    assert "kp_03: missing question" in check_draft(missing, task)[1]


def test_example_spans_cover_doctests_and_example_blocks():
    prompt = 'def f(x):\n    """Double it.\n    For example:\n    f(2) ==> 4\n\n    Rules apply.\n    >>> f(1)\n    2\n    """\n'
    covered = "".join(prompt[s:e] for s, e in example_spans(prompt))
    assert "f(2) ==> 4" in covered and ">>> f(1)" in covered and "    2\n" in covered
    assert "Double it" not in covered and "Rules apply" not in covered


def test_read_source_names_bad_lines(tmp_path):
    p = tmp_path / "src.jsonl"
    p.write_text('{"task_id": "X/1", "prompt": "def a(x):\\n    pass\\n"}\n{"task_id": "X/2"}\n')
    with pytest.raises(CapaError, match=r"src.jsonl:2: expected an object with string fields task_id and prompt"):
        read_source(p)
    p.write_text('{"task_id": "X/1", "prompt": "def a(x):\\n    pass\\n"}\n')
    assert read_source(p)[0].entry_point == "a"


def test_cli_lists_refused_drafts_and_exits_1(tmp_path, capsys, monkeypatch, curated):
    src = tmp_path / "src.jsonl"
    t = load_tasks()
    src.write_text("\n".join(json.dumps({"task_id": k, "prompt": t[k].prompt, "entry_point": t[k].entry_point})
                             for k in (TID, "HumanEval/1")) + "\n")
    engine = engine_for({TID: json.dumps(curated), "HumanEval/1": "no idea"})
    monkeypatch.setattr("runners.make_engine", lambda spec, **kw: engine)
    code = main(["extract-keypoints", "--engine", "scripted", "--source", str(src), "--out", str(tmp_path / "drafts"),
                 "--no-progress"])
    out = capsys.readouterr()
    assert code == 1 and "refused HumanEval/1: the reply holds no JSON object" in out.out
    assert "1 drafts written, 1 refused, of 2 tasks" in out.err
    assert (tmp_path / "drafts" / "HumanEval_0.yaml").exists() and not (tmp_path / "drafts" / "HumanEval_1.yaml").exists()
