"""The command line's conventions: --version, `capa list`, no abbreviated options, one name for
the model spec, and one-line usage errors."""

from __future__ import annotations

import pytest

from capa_hf.cli import build_parser
from capa_hf.evaluation.conditions import known_conditions
from capa_hf.presets import known_presets
from tests.cli_run import one_line_error, run_cli


def test_version(capsys):
    code, out, _ = run_cli(["--version"], capsys)
    from importlib.metadata import version

    assert code == 0 and out.startswith(f"capa {version('capa-hf')} (dataset ")


def test_list_names_what_a_run_can_use(capsys):
    code, out, _ = run_cli(["list", "conditions"], capsys)
    assert code == 0 and out.split() == known_conditions()
    _, out, _ = run_cli(["list", "engines"], capsys)
    names = [line.split()[0] for line in out.splitlines()]
    assert names == ["llamacpp", "openai", "scripted", "vllm", "reference"]
    assert "reference:asker" in out
    _, out, _ = run_cli(["list", "presets"], capsys)
    listed = {line.split()[0] for line in out.splitlines()}
    assert set(known_presets()) <= listed and "llama-3.3-70b:8x80gb" in listed
    _, out, _ = run_cli(["list", "users"], capsys)
    assert out.split() == ["debugger", "llm:<engine", "spec>", "scripted"]


def test_list_refuses_an_unknown_list(capsys):
    one_line_error(["list", "models"], capsys, "'models': expected one of engines, presets, conditions, users")


@pytest.mark.parametrize("argv, expected", [
    (["eval", "--mod", "llamacpp", "--out", "x"], "unrecognized arguments: --mod llamacpp"),
    (["eval", "--engine-ar", "n_ctx=1", "--model", "llamacpp", "--out", "x"], "unrecognized arguments: --engine-ar"),
    (["report", "--allow", "r"], "unrecognized arguments: --allow"),
    (["evaluate"], "invalid choice: 'evaluate'"),
])
def test_no_abbreviations_and_one_line_usage_errors(argv, expected, capsys):
    one_line_error(argv, capsys, expected)


def test_the_model_spec_has_one_name():
    p = build_parser()
    ev = p.parse_args(["eval", "--engine", "vllm:X", "--out", "o"])   # the old extract-keypoints name
    assert ev.model == "vllm:X" and ev.engine_arg == []
    assert p.parse_args(["eval", "--model", "vllm:X", "--out", "o"]).model == "vllm:X"
    for flag in ("--model", "--engine"):
        x = p.parse_args(["extract-keypoints", flag, "llamacpp", "--source", "s", "--out", "o"])
        assert x.engine == "llamacpp"
    assert p.parse_args(["blank-control", "--model", "llamacpp", "--out", "o"]).model == "llamacpp"
