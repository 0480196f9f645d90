"""Specialize a parametrized reference to one combination of convention values.

A reference reads dimension constants (``CONTAINER == "tuple"``). Specializing replaces each
constant by its value and folds what becomes constant: comparisons, ``not``, ``and``/``or`` of
booleans, conditional expressions and ``if`` statements (the dead branch disappears). The
result is the clean program that a reader, or a history trace, sees for that variant.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Mapping

_CMP = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.In: lambda a, b: a in b,
        ast.NotIn: lambda a, b: a not in b, ast.Is: operator.is_, ast.IsNot: operator.is_not}


class SpecializeError(ValueError):
    """The reference cannot be specialized (syntax error, constant assigned or left over)."""


def _const(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return True
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(_const(e) for e in node.elts)


def _value(node: ast.AST):
    return ast.literal_eval(node)


class _Folder(ast.NodeTransformer):
    def __init__(self, values: Mapping[str, str]):
        self.values = dict(values)

    def visit_Name(self, node: ast.Name):
        if node.id in self.values:
            if not isinstance(node.ctx, ast.Load):
                raise SpecializeError(f"the reference assigns to the convention constant {node.id}")
            return ast.copy_location(ast.Constant(self.values[node.id]), node)
        return node

    def visit_Compare(self, node: ast.Compare):
        self.generic_visit(node)
        parts = [node.left, *node.comparators]
        if not all(_const(p) for p in parts) or not all(type(op) in _CMP for op in node.ops):
            return node
        result = True
        for op, a, b in zip(node.ops, parts, parts[1:]):
            result = result and _CMP[type(op)](_value(a), _value(b))
        return ast.copy_location(ast.Constant(bool(result)), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, bool):
            return ast.copy_location(ast.Constant(not node.operand.value), node)
        return node

    def visit_BoolOp(self, node: ast.BoolOp):
        self.generic_visit(node)
        is_and = isinstance(node.op, ast.And)
        kept = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, bool):
                if v.value is (not is_and):      # True in an `or`, False in an `and` decides it
                    return ast.copy_location(ast.Constant(v.value), node)
                continue                          # True in an `and`, False in an `or` drops out
            kept.append(v)
        if not kept:
            return ast.copy_location(ast.Constant(is_and), node)
        if len(kept) == 1:
            return kept[0]
        node.values = kept
        return node

    def visit_IfExp(self, node: ast.IfExp):
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant) and isinstance(node.test.value, bool):
            return node.body if node.test.value else node.orelse
        return node

    def visit_If(self, node: ast.If):
        self.generic_visit(node)
        if isinstance(node.test, ast.Constant) and isinstance(node.test.value, bool):
            return node.body if node.test.value else node.orelse
        return node


def _pure(node: ast.AST) -> bool:
    """An expression without calls, awaits, yields or walrus: evaluating it has no effect."""
    return not any(isinstance(n, (ast.Call, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr))
                   for n in ast.walk(node))


def _drop_empty_ifs(tree: ast.AST) -> None:
    """`if cond: pass` with nothing else, left behind when folding emptied a branch, goes away."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            kept = []
            for stmt in block:
                if isinstance(stmt, ast.If) and not stmt.orelse and _pure(stmt.test) and (
                        not stmt.body or all(isinstance(b, ast.Pass) for b in stmt.body)):
                    continue
                kept.append(stmt)
            block[:] = kept


def _fill_empty_bodies(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list) and name == "body" and not block and not isinstance(node, ast.Module):
                block.append(ast.Pass())


def _drop_unreachable(tree: ast.AST) -> None:
    """Statements after a return/raise/continue/break in the same block never run."""
    for node in ast.walk(tree):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                for i, stmt in enumerate(block):
                    if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
                        del block[i + 1:]
                        break


def specialize(source: str, values: Mapping[str, str], constants: Mapping[str, str] | None = None) -> str:
    """Return `source` with each constant replaced by its value and the dead branches removed.

    `values` maps constant name -> value (e.g. {"CONTAINER": "tuple"}). `constants` names every
    convention constant there is (name -> dimension id): one that `values` does not set must not
    appear in the source, since the variant would not define it.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise SpecializeError(f"the reference does not parse: {exc.msg} (line {exc.lineno})") from None
    tree = _Folder(values).visit(tree)
    _drop_unreachable(tree)
    _drop_empty_ifs(tree)
    _fill_empty_bodies(tree)
    ast.fix_missing_locations(tree)
    leftover = sorted({n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in (constants or {})})
    if leftover:
        raise SpecializeError(f"the reference reads {leftover}, but the task does not declare "
                              f"{', '.join((constants or {})[c] for c in leftover)} among its dimensions")
    return ast.unparse(tree) + "\n"
