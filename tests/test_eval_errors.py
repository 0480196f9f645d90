"""Bad input to `capa eval` gets a clear error, and odd engine replies never crash a session."""

import json

import pytest
from runners.scripted import ScriptedEngine
from runners.types import ChatResult

from capa_hf.cli import main
from capa_hf.evaluation.run import EvalConfig, run_eval


def run_cli(args, capsys):
    code = main(args)
    return code, capsys.readouterr().err


def test_unknown_condition_is_named(tmp_path, capsys):
    code, err = run_cli(["eval", "--model", "scripted", "--condition", "psychic", "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "psychic" in err and "same-user" in err


def test_unknown_model_spec_is_named(tmp_path, capsys):
    code, err = run_cli(["eval", "--model", "gpt-oracle:xyz", "--condition", "none", "--cells", "C01",
                         "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "gpt-oracle" in err and "llamacpp" in err


def test_dataset_without_heldout_split_is_refused(tmp_path, capsys):
    folder = tmp_path / "notcapa"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "train.jsonl").write_text(json.dumps({"x": 1}) + "\n")
    (folder / "README.md").write_text("---\nconfigs:\n- config_name: default\n  data_files:\n"
                                      "  - split: train\n    path: data/train.jsonl\n---\n")
    code, err = run_cli(["eval", "--model", "scripted", "--condition", "none", "--dataset", str(folder),
                         "--out", str(tmp_path / "r")], capsys)
    # a folder without the build's manifest cannot be checked: refused unless --allow-modified
    assert code == 2 and f"{folder}: has no capa_manifest.json" in err and "--allow-modified" in err
    code, err = run_cli(["eval", "--model", "scripted", "--condition", "none", "--dataset", str(folder),
                         "--allow-modified", "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "has no 'heldout' split" in err and str(folder) in err


def test_unknown_cell_is_named(tmp_path, capsys):
    code, err = run_cli(["eval", "--model", "scripted", "--condition", "none", "--cells", "C99",
                         "--out", str(tmp_path / "r")], capsys)
    assert code == 2 and "C99" in err


class OddEngine(ScriptedEngine):
    """Replies empty, then cut off mid-code, then thinks itself out of budget, then nothing useful."""

    def generate(self, requests):
        out = []
        for req in requests:
            n = sum(1 for role, _ in req.messages if role == "assistant")
            if n == 0:
                out.append(ChatResult(text="", finish_reason="stop"))
            elif n == 1:
                out.append(ChatResult(text="Sure, here:\n```python\ndef f(x):\n    return (x +", finish_reason="length"))
            elif n == 2:
                out.append(ChatResult(text="", finish_reason="length", cut_in_thinking=True))
            else:
                out.append(ChatResult(text="Let me think about it.", finish_reason="length"))
        self.seen.extend(requests)
        return out


def test_empty_cut_off_and_thinking_replies_are_turns_not_crashes(tmp_path, capa_data):
    cfg = EvalConfig(model="scripted", condition="none", cells=("C05",), limit=2)
    summary = run_eval(cfg, tmp_path / "r", engine=OddEngine(default="x"), progress=False, data=capa_data)
    recs = [json.loads(l) for l in (tmp_path / "r" / "sessions.jsonl").read_text().splitlines()]
    assert summary["n_incomplete"] == 0 and len(recs) == 2
    for rec in recs:
        assert rec["assistant_turns"] == 8 and not rec["solved"]
        assert rec["turn_kinds"][0] == "empty" and rec["turn_kinds"][2] == "cut_off_thinking"
        assert rec["turn_kinds"][3] == "cut_off"
        # a cut-off reply with an unclosed fence still counts as a (failing) submission
        assert rec["turn_kinds"][1] == "submission" and rec["submissions"][0]["verdict"]["status"] == "error"
    assert summary["overall"]["TTC"]["value"] == 8.0


def test_helpers_the_tests_need_come_from_the_task_not_the_submission():
    """HumanEval/38's test calls encode_cyclic, which only the task's prompt defines."""
    from capa_hf.humaneval import load_tasks
    from capa_hf.simulator.extraction import extract_submission
    from capa_hf.simulator.judges import SandboxJudge
    from capa_hf.simulator.problem import Problem

    task = load_tasks()["HumanEval/38"]
    problem = Problem(task.task_id, task.task_id + "@humaneval", task.entry_point, task.test, task.prompt, "")
    reply = ("```python\ndef undo(s):\n    groups = [s[3 * i:min(3 * i + 3, len(s))] for i in range((len(s) + 2) // 3)]\n"
             "    groups = [g[-1] + g[:-1] if len(g) == 3 else g for g in groups]\n    return ''.join(groups)\n```")
    with SandboxJudge() as judge:
        verdict = judge.run(extract_submission(reply, task.entry_point), problem)
    assert verdict["status"] == "passed", verdict
