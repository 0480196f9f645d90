"""The code-extraction rule: is a reply a submission, which function is the candidate, and
which code runs.

1. **Blocks.** The reply's fenced blocks tagged Python (or untagged) are read in order. A block
   that parses and holds only tests (top-level functions named `test*` or `check`, `Test*`
   classes, asserts, a `pytest`/`unittest` import, and no other function) is a *test block*:
   it is set aside, so a block of tests after the solution never replaces it. A block that does
   not parse is set aside too, unless it is the last block that defines a function.
2. **Submission.** A reply is a submission when a block that is not a test block defines a
   top-level function (a reply whose only functions are tests still counts, with those blocks).
   Anything else is a clarification turn.
3. **Candidate.** The tests' `candidate` binds to the function named like the entry point when
   a block defines one (its last definition wins), else to the *root function* of the last
   block that defines a function: defined at top level, not a test, not `main`, and not called
   or named by another such function of that block (the last if there are several).
4. **Program.** The blocks that are not set aside are merged in reply order into one module, in
   which a later `def` or `class` replaces an earlier one of the same name (as running them
   would). So helpers written in one block and the main function in the next are found, and a
   revised function in a later block wins. The module is then cut to the candidate's
   dependency closure (`sanitize.py`): every import of each block that contributes, and the
   top-level functions, classes, assignments of any expression and `if`/`try`/`with`/`for`/
   `while` blocks that the candidate reaches through the names it reads, transitively. Demo
   calls, prints, asserts, `__main__` blocks, `while True:` and `input()` loops, `input()` and
   `sys.exit()` calls are dropped and recorded.
5. **Unparsable.** When the last block that defines a function does not parse, it is the
   submission as written, and the sandbox reports the syntax error.

Each submission records which rule fired: `binding` (entry_point or root_function),
`block_rule` (one_block; candidate_block: several blocks, only the candidate's runs;
merged_blocks: statements of several blocks run; unparsable), `blocks` (the blocks whose statements run, numbered from 0 among the
reply's Python blocks), `set_aside` (test and unparsable blocks) and `rule` (this rule's
version). Records written before these fields existed still read: only `code`, `candidate`,
`binding` and `dropped` are required.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from capa_hf.simulator.sanitize import closure, units_of

RULE = "closure-1"
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)
_PY_TAGS = {"", "python", "py", "python3"}
_DEF = re.compile(r"^(?:async\s+)?def\s+(\w+)\s*\(", re.MULTILINE)
_TEST_MODULES = {"pytest", "unittest", "hypothesis", "doctest"}
_NOT_ROOTS = {"main"}


@dataclass(frozen=True)
class Submission:
    """A submission extracted from one assistant reply."""

    code: str                       # the sanitized program that is run
    raw_block: str                  # the fenced block that defines the candidate, as written
    candidate: str                  # the function the reply chose, bound to the tests' `candidate`
    binding: str                    # "entry_point" or "root_function"
    dropped: tuple[str, ...] = field(default=())  # top-level statements removed before running
    block_rule: str = "one_block"   # one_block | candidate_block | merged_blocks | unparsable
    blocks: tuple[int, ...] = ()    # the Python blocks whose statements run
    set_aside: tuple[dict, ...] = ()  # {"block", "why": "tests" | "unparsable"}
    rule: str = RULE

    def to_dict(self) -> dict:
        return {"code": self.code, "candidate": self.candidate, "binding": self.binding,
                "dropped": list(self.dropped), "rule": self.rule, "block_rule": self.block_rule,
                "blocks": list(self.blocks), "set_aside": [dict(s) for s in self.set_aside]}


def python_blocks(reply: str) -> list[str]:
    """Fenced blocks tagged as Python (or untagged), in order. An unclosed last fence counts."""
    return [body for tag, body in _FENCE.findall(reply or "") if tag.lower() in _PY_TAGS]


def _parse(block: str) -> ast.Module | None:
    try:
        return ast.parse(block)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def _top_functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def is_test_name(name: str) -> bool:
    return name.startswith("test") or name == "check"


def _is_test_class(node: ast.stmt) -> bool:
    if not isinstance(node, ast.ClassDef):
        return False
    bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
    return node.name.startswith("Test") or "TestCase" in bases


def is_test_block(tree: ast.Module) -> bool:
    """Only tests: test functions or classes, asserts, test-framework imports; no other function."""
    funcs = _top_functions(tree)
    if any(not is_test_name(f.name) for f in funcs):
        return False
    if any(isinstance(n, ast.ClassDef) and not _is_test_class(n) for n in tree.body):
        return False
    imports = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
    imports |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
    return bool(funcs or imports & _TEST_MODULES or any(isinstance(n, ast.Assert) for n in tree.body)
                or any(_is_test_class(n) for n in tree.body))


def _referenced_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def root_function(funcs: list) -> str:
    """The last top-level function that no other one calls or names, tests and `main` left out
    (unless nothing else is there)."""
    eligible = [f for f in funcs if not is_test_name(f.name) and f.name not in _NOT_ROOTS] or list(funcs)
    names = [f.name for f in eligible]
    called_by_others = set()
    for f in eligible:
        called_by_others |= {n for n in _referenced_names(f) if n != f.name}
    roots = [n for n in names if n not in called_by_others]
    return (roots or names)[-1]


def sanitize(block: str, candidate: str | None = None) -> tuple[str, tuple[str, ...]]:
    """One block cut to the candidate's closure (default: its root function); returns
    (code, dropped statements). An unparsable block comes back as it is."""
    tree = _parse(block)
    if tree is None:
        return block, ()
    funcs = _top_functions(tree)
    root = candidate or (root_function(funcs) if funcs else None)
    c = closure(units_of(tree, block, 0), {root} if root else set(), home={0})
    return c.code, tuple(u.text.strip() for u in c.dropped)


@dataclass(frozen=True)
class _Block:
    index: int
    text: str
    tree: ast.Module | None
    functions: tuple[str, ...]      # top-level function names (by regex when it does not parse)
    tests: bool


def _read_blocks(reply: str) -> list[_Block]:
    out = []
    for i, text in enumerate(python_blocks(reply)):
        tree = _parse(text)
        names = tuple(f.name for f in _top_functions(tree)) if tree is not None else tuple(_DEF.findall(text))
        tests = is_test_block(tree) if tree is not None else bool(names) and all(map(is_test_name, names))
        out.append(_Block(i, text, tree, names, tests))
    return out


def extract_submission(reply: str, entry_point: str) -> Submission | None:
    """Apply the extraction rule to one reply; None means the reply is a clarification turn."""
    blocks = _read_blocks(reply)
    solutions = [b for b in blocks if b.functions and not b.tests]
    if not solutions:
        solutions = [b for b in blocks if b.functions]
        if not solutions:
            return None
    last = solutions[-1]
    set_aside = [{"block": b.index, "why": "tests"} for b in blocks if b.tests and b not in solutions]
    if last.tree is None:
        # Unparsable code is still a submission; the sandbox reports the syntax error.
        name = entry_point if entry_point in last.functions else last.functions[-1]
        return Submission(code=last.text, raw_block=last.text, candidate=name,
                          binding="entry_point" if name == entry_point else "root_function",
                          block_rule="unparsable", blocks=(last.index,), set_aside=tuple(set_aside))
    set_aside += [{"block": b.index, "why": "unparsable"} for b in blocks if b.tree is None and b is not last]
    merged = [b for b in blocks if b.tree is not None and (not b.tests or b in solutions)]
    homes = [b for b in solutions if b.tree is not None and entry_point in b.functions]
    if homes:
        home, candidate, binding = homes[-1], entry_point, "entry_point"
    else:
        home, candidate, binding = last, root_function(_top_functions(last.tree)), "root_function"
    units = []
    for b in merged:
        units += units_of(b.tree, b.text, b.index, start=len(units))
    c = closure(units, {candidate}, home={home.index})
    used = c.blocks or (home.index,)
    rule = "one_block" if len(blocks) == 1 else ("merged_blocks" if len(used) > 1 else "candidate_block")
    return Submission(code=c.code, raw_block=home.text, candidate=candidate, binding=binding,
                      dropped=tuple(u.text.strip() for u in c.dropped), block_rule=rule, blocks=used,
                      set_aside=tuple(sorted(set_aside, key=lambda s: s["block"])))
