"""The command line: python -m sandbox check|run ... --json."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sandbox.__file__)))   # where `sandbox` is imported from


def cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "sandbox", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_check_json(tmp_path):
    (tmp_path / "code.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "test.py").write_text("def check(candidate):\n    assert candidate(1, 2) == 3\n")
    r = cli("check", "--code", str(tmp_path / "code.py"), "--test", str(tmp_path / "test.py"),
            "--entry-point", "add", "--json")
    assert r.returncode == 0, r.stderr
    v = json.loads(r.stdout)
    assert v["status"] == "passed" and v["failure"] is None


def test_check_failing_still_exits_0(tmp_path):
    (tmp_path / "code.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "test.py").write_text("def check(candidate):\n    assert candidate(1, 2) == 3\n")
    r = cli("check", "--code", str(tmp_path / "code.py"), "--test", str(tmp_path / "test.py"),
            "--entry-point", "add", "--timeout", "5", "--memory-mb", "256", "--json")
    assert r.returncode == 0
    v = json.loads(r.stdout)
    assert v["status"] == "failed" and v["failure"]["line"] == "assert candidate(1, 2) == 3"


def test_check_with_a_candidate_named_apart_from_the_entry_point(tmp_path):
    (tmp_path / "code.py").write_text("def plus(a, b):\n    return a + b\n")
    (tmp_path / "test.py").write_text("def check(candidate):\n    assert candidate(1, 2) == 3\n")
    args = ("check", "--code", str(tmp_path / "code.py"), "--test", str(tmp_path / "test.py"), "--entry-point", "add")
    assert json.loads(cli(*args, "--candidate", "plus", "--json").stdout)["status"] == "passed"
    assert json.loads(cli(*args, "--json").stdout)["failure"]["type"] == "EntryPointMissing"
    bad = cli(*args, "--candidate", "not a name")
    assert bad.returncode == 2 and "--candidate" in bad.stderr


def test_run_json_and_text(tmp_path):
    (tmp_path / "prog.py").write_text("print('hi')\nraise SystemExit(2)\n")
    r = cli("run", str(tmp_path / "prog.py"), "--timeout", "5", "--json")
    assert r.returncode == 0
    v = json.loads(r.stdout)
    assert v["status"] == "failed" and v["stdout"] == "hi\n"
    r = cli("run", str(tmp_path / "prog.py"))
    assert r.returncode == 0 and "status: failed" in r.stdout


def test_bad_input_exits_2_naming_the_input(tmp_path):
    (tmp_path / "test.py").write_text("def check(candidate):\n    pass\n")
    r = cli("check", "--code", str(tmp_path / "missing.py"), "--test", str(tmp_path / "test.py"),
            "--entry-point", "f", "--json")
    assert r.returncode == 2 and "--code" in r.stderr and "missing.py" in r.stderr and r.stdout == ""
    r = cli("check", "--code", str(tmp_path / "test.py"), "--test", str(tmp_path / "test.py"),
            "--entry-point", "", "--json")
    assert r.returncode == 2 and "--entry-point" in r.stderr
    r = cli("run", str(tmp_path / "nope.py"), "--json")
    assert r.returncode == 2 and "nope.py" in r.stderr
    r = cli("check", "--code", str(tmp_path / "test.py"), "--json")
    assert r.returncode == 2 and "--test" in r.stderr
    r = cli("run", str(tmp_path / "test.py"), "--timeout", "-1")
    assert r.returncode == 2 and "--timeout" in r.stderr


def test_cli_works_from_another_directory(tmp_path):
    (tmp_path / "prog.py").write_text("print(6 * 7)\n")
    r = cli("run", "prog.py", "--json", cwd=tmp_path)
    assert r.returncode == 0 and json.loads(r.stdout)["stdout"] == "42\n"


def test_text_output_survives_what_a_submission_can_put_in_a_verdict(tmp_path):
    """A lone surrogate in an exception message used to crash the text output."""
    (tmp_path / "code.py").write_text("def f(x):\n    raise ValueError('bad \\ud800 value')\n")
    (tmp_path / "test.py").write_text("def check(candidate):\n    assert candidate(1) == 1\n")
    r = cli("check", "--code", str(tmp_path / "code.py"), "--test", str(tmp_path / "test.py"),
            "--entry-point", "f")
    assert r.returncode == 0, r.stderr
    assert "status: error" in r.stdout and "failure: ValueError: bad \ufffd value" in r.stdout
