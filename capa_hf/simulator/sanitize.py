"""The dependency closure: which top-level statements of a submission are run.

A submission's program is a list of top-level statements (from one fenced block, or from
several merged in reply order, see extraction.py). Before it runs, it is cut down to what the
candidate function needs:

- every `from __future__` import is kept and moved to the top (Python requires it there);
- a statement is kept when it *provides* a name that is reached: it binds the name (a `def`, a
  `class` with its decorators, an assignment of any expression, an import) or changes it in
  place (`TABLE[k] = v`, `TABLE.attr = v`, `TABLE += ...`, or a method call such as
  `TABLE.update(...)` on a name that an assignment, not an import, binds). Compound
  statements count by what their bodies provide: a top-level `if`, `try`, `with` or `for`
  that binds a reached name is kept whole (`try: from math import comb` / `except ImportError:
  def comb(...)`);
- the candidate's name is reached; so is every name that a kept statement reads, anywhere
  inside it (decorators, defaults, bases, bodies), transitively;
- a `def` or `class` that a later `def` or `class` of the same name replaces is superseded:
  the later one wins, as it would when the module runs;
- never kept, whatever they bind: `if __name__ == "__main__":` blocks, and top-level `while`
  loops that are endless (`while True:`) or read `input()` (demo and REPL loops); another
  `while` loop counts like a `for` loop (one that fills a table is kept);
- everything else is dropped: example calls, `print`s, asserts, `input()` and `sys.exit()`
  calls, doctest text, test functions nothing reaches, and assignments nothing reads.

Every import of a block that contributes (the candidate's block, and each block a kept
statement comes from) is kept, used or not, except one that only dropped statements read (the
`import doctest` of a `doctest.testmod()` call): it goes with them. An import of another block
is kept only when it binds a reached name that nothing kept provides, so a usage block's
`from solution import f` never runs when the reply defines `f` itself. The names a statement reads are Python's
own scope analysis (`symtable`): a function's parameters and locals never reach a top-level
name they share (`result = f(input())` stays dropped even if `f` has a local `result`). Every
statement that is not kept is returned, in order, so the record says what was dropped.
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_IMPORTS = (ast.Import, ast.ImportFrom)


@dataclass(frozen=True)
class Unit:
    """One top-level statement of the program, and the names it provides and reads."""

    block: int                      # which fenced block of the reply it came from
    index: int                      # its position in the program
    text: str                       # its source, decorators included
    kind: str                       # future | import | definition | main_guard | while | statement
    binds: frozenset[str]           # names it binds, or changes by assignment, anywhere in its bodies
    calls_on: frozenset[str]        # names it calls a method on (a change in place when they are variables)
    uses: frozenset[str]            # names it reads, anywhere inside


@dataclass(frozen=True)
class Closure:
    kept: tuple[Unit, ...]          # in program order, `from __future__` imports first
    dropped: tuple[Unit, ...]       # in program order
    superseded: tuple[Unit, ...]    # replaced by a later def/class of the same name (also in dropped)
    reached: frozenset[str]

    @property
    def code(self) -> str:
        return "".join(u.text.rstrip("\n") + "\n" for u in self.kept)

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(sorted({u.block for u in self.kept}))


def segment(source: str, node: ast.stmt) -> str:
    """The exact source of a top-level statement, with a definition's decorators."""
    text = ast.get_source_segment(source, node) or ""
    decorators = getattr(node, "decorator_list", None) or []
    return "".join("@" + (ast.get_source_segment(source, d) or "") + "\n" for d in decorators) + text


def _base_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _target_names(target: ast.AST, out: set[str]) -> None:
    """Names an assignment target binds or changes (`x`, `a, *b`, `T[k]`, `obj.attr`)."""
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _target_names(elt, out)
    elif (name := _base_name(target)) is not None:
        out.add(name)


def _import_names(node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    return {a.asname or a.name for a in node.names if a.name != "*"}


def _provided(stmts: list[ast.stmt], binds: set[str], calls_on: set[str]) -> None:
    """What a list of statements at module scope provides (recursing into compound bodies, not
    into function or class bodies)."""
    for s in stmts:
        if isinstance(s, _SCOPES):
            binds.add(s.name)
        elif isinstance(s, _IMPORTS):
            binds |= _import_names(s)
        elif isinstance(s, ast.Assign):
            for t in s.targets:
                _target_names(t, binds)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            _target_names(s.target, binds)
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            _target_names(s.target, binds)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                if item.optional_vars is not None:
                    _target_names(item.optional_vars, binds)
        elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Attribute):
            if (name := _base_name(s.value.func.value)) is not None:
                calls_on.add(name)
        if isinstance(s, (ast.Try, ast.TryStar)):
            binds |= {h.name for h in s.handlers if h.name}
            for h in s.handlers:
                _provided(h.body, binds, calls_on)
        for attr in ("body", "orelse", "finalbody"):
            if not isinstance(s, _SCOPES) and isinstance(getattr(s, attr, None), list):
                _provided(getattr(s, attr), binds, calls_on)
        if isinstance(s, ast.Match):
            for case in s.cases:
                _provided(case.body, binds, calls_on)


def _reads(node: ast.AST, text: str) -> frozenset[str]:
    """The global names a statement reads: Python's own scope analysis (symtable), so that a
    function's parameters and locals never count, whatever top-level names they share."""
    names = {n.target.id for n in ast.walk(node) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)}
    try:
        top = symtable.symtable(text, "<submission>", "exec")
    except (SyntaxError, ValueError):   # e.g. `return` at top level: the sandbox reports it
        return frozenset(names | {n.id for n in ast.walk(node) if isinstance(n, ast.Name)})
    tables = [top]
    while tables:
        table = tables.pop()
        names |= {s.get_name() for s in table.get_symbols()
                  if s.is_referenced() and (table is top or s.is_global())}
        tables.extend(table.get_children())
    return frozenset(names)


def is_main_guard(node: ast.stmt) -> bool:
    """`if __name__ == "__main__":` (either side of the comparison)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1:
        return False
    sides = [node.test.left, *node.test.comparators]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return isinstance(node.test.ops[0], ast.Eq) and names == ["__name__"] and values == ["__main__"]


def _kind(node: ast.stmt) -> str:
    if isinstance(node, ast.ImportFrom) and node.module == "__future__":
        return "future"
    if isinstance(node, _IMPORTS):
        return "import"
    if isinstance(node, _SCOPES):
        return "definition"
    if is_main_guard(node):
        return "main_guard"
    if isinstance(node, ast.While) and _endless_or_interactive(node):
        return "while"
    return "statement"


def _endless_or_interactive(node: ast.While) -> bool:
    """`while True:` (any constant true test) or a loop that reads `input()`: a demo or REPL loop."""
    if isinstance(node.test, ast.Constant) and node.test.value:
        return True
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "input"
               for n in ast.walk(node))


def units_of(tree: ast.Module, source: str, block: int, start: int = 0) -> list[Unit]:
    """The top-level statements of one parsed block, numbered from `start`."""
    out = []
    for i, node in enumerate(tree.body):
        binds: set[str] = set()
        calls_on: set[str] = set()
        _provided([node], binds, calls_on)
        text = segment(source, node)
        out.append(Unit(block=block, index=start + i, text=text, kind=_kind(node), binds=frozenset(binds),
                        calls_on=frozenset(calls_on), uses=_reads(node, text)))
    return out


def _superseded(units: list[Unit]) -> set[int]:
    """Indices of defs/classes that a later def/class of the same name replaces."""
    last: dict[str, int] = {}
    out = set()
    for u in units:
        if u.kind == "definition":
            (name,) = u.binds
            if name in last:
                out.add(last[name])
            last[name] = u.index
    return out


def closure(units: list[Unit], roots: set[str], home: set[int] = frozenset()) -> Closure:
    """Keep what `roots` reach and the imports (see the module docstring); `home`: blocks whose
    imports count as contributing even when nothing of theirs is reached."""
    superseded = _superseded(units)
    imported = {n for u in units if u.kind in ("import", "future") for n in u.binds}
    providers: dict[str, list[Unit]] = {}
    for u in units:
        if u.index in superseded or u.kind in ("main_guard", "while", "import", "future"):
            continue
        for name in u.binds | {n for n in u.calls_on if n not in imported}:
            providers.setdefault(name, []).append(u)
    reached: set[str] = set()
    kept: set[int] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        for u in providers.get(name, ()):
            if u.index not in kept:
                kept.add(u.index)
                todo.extend(u.uses - reached)
    contributing = set(home) | {u.block for u in units if u.index in kept}
    demo_reads = {n for u in units if u.index not in kept and u.kind not in ("import", "future") for n in u.uses}
    provided = {n for u in units if u.index in kept for n in u.binds}
    for u in units:
        if u.kind == "future":
            kept.add(u.index)
        elif u.kind == "import" and u.block in contributing:
            if u.binds & reached or not u.binds or not u.binds <= demo_reads:
                kept.add(u.index)
        elif u.kind == "import" and (u.binds & reached) - provided:
            kept.add(u.index)
    futures = {u.text: u for u in reversed(units) if u.kind == "future"}      # one of each, the first
    ordered = [u for u in units if u.kind == "future" and futures[u.text] is u]
    kept -= {u.index for u in units if u.kind == "future" and futures[u.text] is not u}
    ordered += [u for u in units if u.kind != "future" and u.index in kept]
    return Closure(kept=tuple(ordered), dropped=tuple(u for u in units if u.index not in kept),
                   superseded=tuple(u for u in units if u.index in superseded), reached=frozenset(reached))
