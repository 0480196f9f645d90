"""Engines from entry points (group capa.engines): the built-ins are declared there, a plug-in's
builder is loaded on the first look-up and built like any engine, a broken one or one that takes
a built-in's name is refused, naming it."""
from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import runners.registry as reg
from runners.scripted import ScriptedEngine

GROUP = "capa.engines"
DECLARED = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"][
    "entry-points"][GROUP]


def echo(arg, **options):
    """Engine `echo:<text>`: replies `text` to every request."""
    return ScriptedEngine(default=arg, model=f"echo-{options.get('tag', 'plain')}")


echo.options = lambda: ["tag"]


@pytest.fixture
def installed(monkeypatch):
    """Pretend these entry points are installed; the engine table is restored afterwards."""
    monkeypatch.setattr(reg, "_ENGINES", dict(reg._ENGINES))
    monkeypatch.setattr(reg, "_plugins_loaded", False)

    def install(parts: dict):
        eps = [EntryPoint(name, value, GROUP) for name, value in parts.items()]
        monkeypatch.setattr(reg, "entry_points", lambda group: [e for e in eps if e.group == group])
    return install


def test_the_declared_engines_are_the_built_ins():
    assert sorted(DECLARED) == sorted(reg.ENGINES)
    for name, value in DECLARED.items():
        assert EntryPoint(name, value, GROUP).load() is reg._ENGINES[name], name


def test_capa_installed_with_its_entry_points_keeps_the_built_ins(installed):
    before = dict(reg._ENGINES)
    installed(DECLARED)
    assert reg.known_engines() == sorted(before) and reg._ENGINES == before


def test_a_plug_in_engine_is_built_with_its_options(installed):
    installed({"echo": "tests.runners.test_runners_entry_points:echo"})
    assert "echo" in reg.known_engines() and reg.engine_options("echo:hi") == ["tag"]
    engine = reg.make_engine("echo:hi", tag="x")
    assert engine.model == "echo-x"
    with pytest.raises(ValueError, match="unknown echo engine option.*'n_ctx'"):
        reg.make_engine("echo:hi", n_ctx=1)


def test_a_broken_plug_in_engine_is_named(installed):
    installed({"gone": "tests.no_such_module:engine"})
    with pytest.raises(ValueError, match="engine plug-in 'gone' .*capa.engines.* failed to load"):
        reg.make_engine("scripted")


def test_a_plug_in_engine_that_takes_a_built_in_name_is_refused(installed):
    installed({"vllm": "tests.runners.test_runners_entry_points:echo"})
    with pytest.raises(ValueError, match="engine plug-in 'vllm' .*takes a name already registered"):
        reg.known_engines()
