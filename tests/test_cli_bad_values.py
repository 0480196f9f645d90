"""Every bad `capa eval` value is refused before anything runs: exit 2, one line on stderr that
names the flag and what it expects, no traceback; an existing run folder is left as it was and a
new --out is never created."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_run import one_line_error

OLD_RUN = Path(__file__).parent / "data" / "old_run"
BASE = ["eval", "--model", "reference:asker", "--cells", "C01", "--limit", "2", "--no-progress"]

BAD = [
    (["--max-turns", "0"], "--max-turns: expected an integer >= 1, got 0"),
    (["--max-turns", "-1"], "--max-turns: expected an integer >= 1, got -1"),
    (["--max-tokens", "0"], "--max-tokens: expected an integer >= 1, got 0"),
    (["--temperature", "-1"], "--temperature: expected a number >= 0, got -1.0"),
    (["--top-p", "2"], "--top-p: expected a number in (0, 1], got 2.0"),
    (["--samples", "0"], "--samples: expected an integer >= 1, got 0"),
    (["--limit", "0"], "--limit: expected an integer >= 1, got 0"),
    (["--limit", "-5"], "--limit: expected an integer >= 1, got -5"),
    (["--condition-arg", "foo=1"], "--condition-arg foo: the condition 'none' takes no options "
                                   "(no condition declares foo)"),
    (["--condition", "mem0", "--condition-arg", "foo=1"],
     "--condition-arg foo: the condition 'mem0' takes memory_llm, memory_scope (no condition declares foo)"),
    (["--gate-model", "scripted"], "--condition-arg gate_model: the condition 'none' takes no options "
                                   "(gate_model is an option of gate)"),
]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("bad, message", BAD, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_bad_value_is_refused_and_nothing_runs(bad, message, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run)             # a run folder holding two finished sessions
    before = snapshot(run)
    err = one_line_error(BASE + ["--out", str(run)] + bad, capsys, message)
    assert err.startswith("capa eval: error: ")
    assert snapshot(run) == before
    fresh = tmp_path / "fresh"
    one_line_error(BASE + ["--out", str(fresh)] + bad, capsys, message)
    assert not fresh.exists()


def test_the_process_prints_one_line_and_exits_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, "-m", "capa_hf", *BASE, "--out", str(tmp_path / "r"), "--max-turns", "0"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["capa eval: error: --max-turns: expected an integer >= 1, got 0"]
    assert proc.stdout == "" and not (tmp_path / "r").exists()
