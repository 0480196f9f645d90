"""The code-extraction rule: is a reply a submission, and which function is the candidate?

A reply is a submission when it holds a fenced Python block that defines a top-level function;
the last such block wins. The tests' `candidate` binds to the function named like the entry
point when the block defines one, else to the block's root function: defined at top level and
not called by any other top-level function of the block (the last such if there are several).
Before running, only imports, function and class definitions and assignments of literal
constants are kept; example calls, prints and `__main__` blocks are dropped and recorded.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PY_TAGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class Submission:
    """A submission extracted from one assistant reply."""

    code: str                       # the sanitized program that is run
    raw_block: str                  # the fenced block as written
    candidate: str                  # the function bound to the tests' `candidate`
    binding: str                    # "entry_point" or "root_function"
    dropped: tuple[str, ...] = field(default=())  # top-level statements removed before running

    def to_dict(self) -> dict:
        return {"code": self.code, "candidate": self.candidate, "binding": self.binding,
                "dropped": list(self.dropped)}


def python_blocks(reply: str) -> list[str]:
    """Fenced blocks tagged as Python (or untagged), in order. An unclosed last fence counts."""
    return [body for tag, body in _FENCE.findall(reply or "") if tag.lower() in _PY_TAGS]


def _parse(block: str) -> ast.Module | None:
    try:
        return ast.parse(block)
    except (SyntaxError, ValueError):
        return None


def _top_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _defines_function(block: str) -> bool:
    tree = _parse(block)
    if tree is not None:
        return bool(_top_functions(tree))
    return re.search(r"^def\s+\w+\s*\(", block, re.MULTILINE) is not None


def _called_names(node: ast.AST) -> set[str]:
    return {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def root_function(funcs: list) -> str:
    names = [f.name for f in funcs]
    called_by_others = set()
    for f in funcs:
        called_by_others |= {n for n in _called_names(f) if n != f.name}
    roots = [n for n in names if n not in called_by_others]
    return (roots or names)[-1]


def _is_literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False


def _keep(stmt: ast.stmt) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
        return _is_literal(stmt.value)
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return _is_literal(stmt.value)
    return False


def sanitize(block: str) -> tuple[str, tuple[str, ...]]:
    """Keep imports, defs, classes and literal constants; return (code, dropped statements)."""
    tree = _parse(block)
    if tree is None:
        return block, ()
    lines = block.splitlines(keepends=True)
    kept, dropped = [], []
    for stmt in tree.body:
        start = min([d.lineno for d in getattr(stmt, "decorator_list", [])] + [stmt.lineno])
        text = "".join(lines[start - 1: stmt.end_lineno])
        (kept if _keep(stmt) else dropped).append(text)
    return "".join(t if t.endswith("\n") else t + "\n" for t in kept), tuple(d.strip() for d in dropped)


def extract_submission(reply: str, entry_point: str) -> Submission | None:
    """Apply the extraction rule to one reply; None means the reply is a clarification turn."""
    blocks = [b for b in python_blocks(reply) if _defines_function(b)]
    if not blocks:
        return None
    block = blocks[-1]
    tree = _parse(block)
    if tree is None:
        # Unparsable code is still a submission; the sandbox reports the syntax error.
        m = re.findall(r"^def\s+(\w+)\s*\(", block, re.MULTILINE)
        name = entry_point if entry_point in m else m[-1]
        return Submission(code=block, raw_block=block, candidate=name,
                          binding="entry_point" if name == entry_point else "root_function")
    funcs = _top_functions(tree)
    names = [f.name for f in funcs]
    if entry_point in names:
        candidate, binding = entry_point, "entry_point"
    else:
        candidate, binding = root_function(funcs), "root_function"
    code, dropped = sanitize(block)
    return Submission(code=code, raw_block=block, candidate=candidate, binding=binding, dropped=dropped)
