"""The task's test as the judge runs it: compiled once, the names it reads, its failing line.

Trusted code (the dataset's test and prelude), compiled in the worker and cached per test.
"""
from __future__ import annotations

import builtins
import dis
import types
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

TEST_FILE = "<capa-test>"
PRELUDE_FILE = "<capa-prelude>"
_BUILTIN_NAMES = frozenset(dir(builtins))
_EXTENDED_ARG = dis.opmap["EXTENDED_ARG"]
_LOAD_GLOBAL = dis.opmap["LOAD_GLOBAL"]   # (3.11+: its name is co_names[arg >> 1])
_NAME_OPS = frozenset(dis.opmap[n] for n in ("LOAD_NAME", "STORE_NAME", "DELETE_NAME", "STORE_GLOBAL",
                                             "DELETE_GLOBAL"))


@dataclass(frozen=True)
class CompiledTest:
    test_code: types.CodeType
    prelude_code: types.CodeType | None
    global_names: tuple[str, ...]   # names the test's code reads as globals (not builtins)
    test_lines: tuple[str, ...]
    uses_random: bool   # the test or prelude names `random`: its calls may differ from run to run


def _walk(co: types.CodeType):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from _walk(c)


def _global_names(co: types.CodeType) -> set[str]:
    """The names the code reads or binds as globals (not attributes, not locals)."""
    out = set()
    for c in _walk(co):
        code, names, ext = c.co_code, c.co_names, 0
        for i in range(0, len(code), 2):
            op, arg = code[i], code[i + 1] | ext
            ext = arg << 8 if op == _EXTENDED_ARG else 0
            if op == _LOAD_GLOBAL:
                out.add(names[arg >> 1])
            elif op in _NAME_OPS:
                out.add(names[arg])
    return out


@lru_cache(maxsize=512)
def compile_test(test: str, prelude: str | None) -> CompiledTest:
    test_code = compile(test, TEST_FILE, "exec", dont_inherit=True)
    prelude_code = compile(prelude, PRELUDE_FILE, "exec", dont_inherit=True) if prelude else None
    names = set().union(*(c.co_names for c in _walk(test_code)))
    uses_random = "random" in names or (prelude_code is not None and
                                        "random" in set().union(*(c.co_names for c in _walk(prelude_code))))
    return CompiledTest(test_code, prelude_code, tuple(sorted(_global_names(test_code) - _BUILTIN_NAMES)),
                        tuple(test.splitlines()), uses_random)


def identifier(name: str) -> str:
    """``name`` as Python itself reads it in source: NFKC-normalized (``\ufb01nd`` is ``find``)."""
    return unicodedata.normalize("NFKC", name)


def test_line(tb, lines: tuple[str, ...]) -> str | None:
    lineno = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == TEST_FILE:
            lineno = tb.tb_lineno
        tb = tb.tb_next
    if lineno and 0 < lineno <= len(lines):
        return lines[lineno - 1].strip() or None
    return None
