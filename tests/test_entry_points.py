"""The entry-point groups pyproject.toml declares: CAPA's own parts are listed in them, each
pointing at the part its registry holds, and a package installed with those entry points (CAPA
itself, say) changes nothing; a plug-in that takes a built-in's name is refused."""
from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import capa_hf.registry as registry
from capa_hf.errors import CapaError
from capa_hf.evaluation.conditions.base import CONDITIONS
from capa_hf.evaluation.sources import SOURCES
from capa_hf.simulator.protocols import JUDGES, USERS

DECLARED = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
    "entry-points"]
REGISTRIES = {r.group: r for r in (CONDITIONS, USERS, JUDGES, SOURCES)}


def entry_points_of(groups: dict):
    eps = [EntryPoint(name, value, group) for group, parts in groups.items() for name, value in parts.items()]
    return lambda group: [e for e in eps if e.group == group]


def test_every_group_is_declared():
    assert set(DECLARED) == set(REGISTRIES) | {"capa.engines"}


@pytest.mark.parametrize("group", sorted(REGISTRIES))
def test_the_declared_parts_are_the_registered_built_ins(group):
    parts = REGISTRIES[group]
    declared = DECLARED[group]
    assert sorted(declared) == parts.names()
    for name, value in declared.items():
        assert EntryPoint(name, value, group).load() is parts.get(name), name


def reloaded(monkeypatch, group: str, installed: dict):
    """The shipped registry of `group`, read again with `installed` as the entry points (its
    parts and state are restored after the test)."""
    parts = REGISTRIES[group]
    parts.names()
    monkeypatch.setattr(parts, "_parts", dict(parts._parts))
    monkeypatch.setattr(parts, "_loaded", False)
    monkeypatch.setattr(registry, "entry_points", entry_points_of(installed))
    return parts


@pytest.mark.parametrize("group", sorted(REGISTRIES))
def test_capa_installed_with_its_entry_points_loads_the_same_parts(monkeypatch, group):
    before = dict(REGISTRIES[group]._parts)
    parts = reloaded(monkeypatch, group, DECLARED)
    assert parts.names() == sorted(before) and parts._parts == before
    # without the built-in modules' registrations, the entry points alone give the same parts
    alone = registry.Registry(parts.kind, group)
    assert alone.names() == sorted(before) and all(alone.get(n) is before[n] for n in before)


def test_a_plug_in_that_takes_a_built_in_name_is_refused(monkeypatch):
    parts = reloaded(monkeypatch, "capa.judges", {"capa.judges": {"sandbox": "tests.test_plugins:ReturnsSomething"}})
    with pytest.raises(CapaError, match="judge 'sandbox' is registered twice: capa_hf.simulator.judges"):
        parts.names()
