"""Every flag of every `capa` subcommand has help text, and the help of an option with a default
shows it."""

from __future__ import annotations

import argparse

import pytest

from capa_hf.cli import CapaParser, build_parser, shown_default


def parsers(parser: argparse.ArgumentParser, prog: str = "capa"):
    """(name, parser) for `parser` and every subcommand under it."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{prog} {name}")


def help_problems(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    """What is wrong with the help of `parser`'s own flags and subcommands."""
    formatter = parser._get_formatter()
    shown = " ".join(parser.format_help().split())
    problems = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            problems += [f"{prog} {c.dest}: no help" for c in action._choices_actions if not c.help]
            continue
        name = "/".join(action.option_strings) or action.dest
        if not action.help or action.help == argparse.SUPPRESS:
            problems.append(f"{prog} {name}: no help")
            continue
        text = formatter._expand_help(action)
        if " ".join(text.split()) not in shown:
            problems.append(f"{prog} {name}: help not shown")
        if shown_default(action) and str(action.default) not in text:
            problems.append(f"{prog} {name}: help does not show the default {action.default!r}")
    return problems


ALL = list(parsers(build_parser()))


@pytest.mark.parametrize("prog, parser", ALL, ids=[p for p, _ in ALL])
def test_every_flag_has_help_and_shows_its_default(prog, parser):
    assert help_problems(parser, prog) == []


def test_the_walk_reaches_every_subcommand():
    names = {p for p, _ in ALL}
    assert {"capa eval", "capa build", "capa blank-control", "capa report", "capa list", "capa view"} <= names


def test_the_check_finds_a_flag_without_help_or_default():
    p = CapaParser(prog="t")
    p.add_argument("--quiet-one")
    p.add_argument("--budget", type=int, default=8, help="turns (default: the usual amount)")
    p.add_argument("--seed", type=int, default=0, help="a seed")
    p.add_argument("--flag", action="store_true", help="a switch")
    assert help_problems(p, "t") == ["t --quiet-one: no help",
                                     "t --budget: help does not show the default 8"]
    assert "a seed (default: 0)" in " ".join(p.format_help().split())
