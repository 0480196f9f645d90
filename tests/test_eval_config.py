"""EvalConfig: a documented, frozen, validated model; its config.json `run` block is the one the
dataclass it replaced wrote (tests/data: blocks written by that code), so old runs still resume;
its field docs and defaults are `capa eval --help`'s."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from capa_hf.cli import build_parser
from capa_hf.errors import CapaError
from capa_hf.evaluation.config import EvalConfig, field_default, field_doc, flag_of
from capa_hf.evaluation.eval_cli import config_from_args
from capa_hf.evaluation.rescore import eval_config
from tests.cli_run import run_cli

DATA = Path(__file__).parent / "data"
BEFORE = json.loads((DATA / "eval_configs_before_pydantic.json").read_text())
OLD_RUN = DATA / "old_run"
OLD_ARGV = ["eval", "--model", "reference:asker", "--cells", "C01", "--limit", "2"]


def test_every_field_is_documented():
    missing = [name for name, f in EvalConfig.model_fields.items() if not (f.description or "").strip()]
    assert not missing


@pytest.mark.parametrize("case", BEFORE, ids=lambda c: " ".join(c["argv"][1:5]))
def test_the_run_block_is_the_one_the_dataclass_wrote(case):
    args = build_parser().parse_args(case["argv"])
    run = config_from_args(args).to_dict()
    assert list(run) == list(case["run"])                 # the same keys, in the same order
    assert json.loads(json.dumps(run)) == case["run"]
    assert eval_config(case["run"]).to_dict() == run      # --rescore reads a run block back


def test_a_run_written_by_the_dataclass_resumes(tmp_path, capsys):
    import hashlib

    from capa_hf.paths import DEFAULT_DATASET_DIR
    from capa_hf.version import PIPELINE_VERSION

    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    # the run was played on dataset 0.2.1; what this test is about is its `run` block, so its data
    # identity is set to today's build (a run on other data is refused: test_eval_resume.py)
    config = json.loads((run / "config.json").read_text())
    config.update(pipeline_version=PIPELINE_VERSION, dataset_version=PIPELINE_VERSION,
                  dataset_manifest_sha256=hashlib.sha256((DEFAULT_DATASET_DIR / "capa_manifest.json").read_bytes()).hexdigest())
    (run / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    before = (run / "sessions.jsonl").read_bytes()
    code, _, err = run_cli(OLD_ARGV + ["--out", str(run), "--no-progress"], capsys)
    assert code == 0, err
    assert "another config" not in err
    assert (run / "sessions.jsonl").read_bytes() == before          # both sessions were kept, none replayed
    assert json.loads((run / "config.json").read_text())["run"] == json.loads((OLD_RUN / "config.json").read_text())["run"]


def test_frozen_and_validated_on_every_copy():
    cfg = EvalConfig(model="scripted", cells=["C01"], limit=2)
    assert cfg.cells == ("C01",) and cfg.condition == field_default("condition")
    with pytest.raises(ValidationError):
        cfg.max_turns = 3
    assert cfg.replace(max_turns=3).max_turns == 3 and cfg.max_turns == field_default("max_turns")
    with pytest.raises(CapaError, match=r"^--max-turns: expected an integer >= 1, got 0$"):
        cfg.replace(max_turns=0)
    with pytest.raises(CapaError, match="max_turn: Extra inputs are not permitted"):
        EvalConfig(model="scripted", max_turn=3)


@pytest.mark.parametrize("field, value, message", [
    ("max_turns", -1, "--max-turns: expected an integer >= 1, got -1"),
    ("max_tokens", 0, "--max-tokens: expected an integer >= 1, got 0"),
    ("temperature", float("nan"), "--temperature: expected a number >= 0, got nan"),
    ("top_p", 0.0, "--top-p: expected a number in (0, 1], got 0.0"),
    ("top_k", -2, "--top-k: expected an integer >= 0 (0: off), got -2"),
    ("min_p", 1.5, "--min-p: expected a number in [0, 1], got 1.5"),
    ("samples", 0, "--samples: expected an integer >= 1, got 0"),
    ("limit", 0, "--limit: expected an integer >= 1, got 0"),
    ("max_errors", -1, "--max-errors: expected an integer >= 0, got -1"),
    ("model", "", "--model: expected a runners engine spec, got ''"),
    ("engine_args", "n_ctx=1", "--engine-arg: expected a valid dictionary, got 'n_ctx=1'"),
])
def test_a_bad_value_names_its_flag(field, value, message):
    kw = {"model": "scripted", field: value}
    with pytest.raises(CapaError) as exc:
        EvalConfig(**kw)
    assert str(exc.value) == message


def _eval_actions() -> dict:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return {a.dest: a for a in sub.choices["eval"]._actions}


# flags a preset may set: "not given" (None) on the command line, the config's default named in the help
PRESET_SET = {"model", "engine_args", "max_tokens", "temperature", "top_p", "top_k", "min_p", "preset"}
DESTS = {"engine_args": "engine_arg", "user_engine_args": "user_engine_arg", "judge_engine_args": "judge_engine_arg",
         "condition_args": "condition_arg"}


@pytest.mark.parametrize("name", list(EvalConfig.model_fields))
def test_each_flag_takes_its_help_and_default_from_the_field(name):
    action = _eval_actions()[DESTS.get(name, name)]
    assert flag_of(name) in action.option_strings
    assert action.help.replace("%%", "%").startswith(field_doc(name))
    if name in PRESET_SET:
        assert action.default in (None, [])
        if not EvalConfig.model_fields[name].is_required() and field_default(name) not in (None, {}):
            assert f"default: {field_default(name)}, unless a preset sets it" in action.help
    elif name not in DESTS:
        assert action.default == field_default(name)


def test_eval_help_shows_the_field_docs(capsys):
    code, out, _ = run_cli(["eval", "--help"], capsys)
    flat = " ".join(out.split())
    assert code == 0
    for name in ("max_turns", "samples", "max_errors", "top_p"):
        assert " ".join(field_doc(name).split()) in flat
    assert "(default: 8)" in flat and "(default: 768, unless a preset sets it)" in flat
