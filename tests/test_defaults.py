"""Every default lives in capa_hf/defaults.py: no other module of capa_hf restates one as a literal."""
from __future__ import annotations

import ast
from pathlib import Path

import capa_hf
from capa_hf import defaults

PKG = Path(capa_hf.__file__).resolve().parent
DEFAULTS = {k: v for k, v in vars(defaults).items() if k.isupper()}


def _values(suffix: str) -> set:
    return {v for k, v in DEFAULTS.items() if k.endswith(suffix) and isinstance(v, (int, float, str))}


# parameter / field / option names whose default must come from defaults.py -> the values it has there
GOVERNED = {
    "max_turns": {defaults.MAX_TURNS},
    "max_tokens": _values("MAX_TOKENS"),
    "planner_max_tokens": {defaults.PLANNER_MAX_TOKENS},
    "expression_max_tokens": {defaults.EXPRESSION_MAX_TOKENS},
    "temperature": _values("TEMPERATURE") | {defaults.GREEDY},
    "timeout_s": {defaults.SANDBOX_LIMITS.timeout_s, defaults.REGEN_LIMITS.timeout_s},
    "memory_mb": {defaults.SANDBOX_LIMITS.memory_mb},
    "split": {defaults.SPLIT},
    "user": {defaults.USER},
    "judge": {defaults.JUDGE},
    "condition": {defaults.CONDITION},
}


def _literal(node) -> tuple[bool, object]:
    if isinstance(node, ast.Constant) and node.value is not None and not isinstance(node.value, bool):
        return True, node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return True, -node.operand.value
    return False, None


def restatements(source: str, where: str) -> list[str]:
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        # a constant of defaults.py defined again
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id in DEFAULTS:
                    found.append(f"{where}:{node.lineno}: {t.id} is defined in defaults.py")
        # a parameter default
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            pos = args.posonlyargs + args.args
            pairs = list(zip(pos[len(pos) - len(args.defaults):], args.defaults)) + \
                [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            for arg, default in pairs:
                ok, value = _literal(default)
                if ok and arg.arg in GOVERNED:
                    found.append(f"{where}:{default.lineno}: parameter {arg.arg}={value!r}")
        # a dataclass / model field default
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                    ok, value = _literal(stmt.value)
                    if ok and stmt.target.id in GOVERNED:
                        found.append(f"{where}:{stmt.lineno}: field {stmt.target.id} = {value!r}")
        if isinstance(node, ast.Call):
            # an option's default: add_argument("--max-turns", default=8)
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument" and node.args:
                first = node.args[0]
                dest = first.value.lstrip("-").replace("-", "_") if isinstance(first, ast.Constant) else None
                for kw in node.keywords:
                    ok, value = _literal(kw.value)
                    if kw.arg == "default" and ok and dest in GOVERNED:
                        found.append(f"{where}:{kw.lineno}: option --{dest} default={value!r}")
            # a default value passed by name: Sampling(temperature=0.0), CheckJob(timeout_s=10.0)
            for kw in node.keywords:
                ok, value = _literal(kw.value)
                if ok and kw.arg in GOVERNED and value in GOVERNED[kw.arg]:
                    found.append(f"{where}:{kw.lineno}: {kw.arg}={value!r} restates a default")
        ok, value = _literal(node)
        if ok and value == defaults.DATASET_OUT:
            found.append(f"{where}:{node.lineno}: {value!r} is defaults.DATASET_OUT")
    return found


def test_no_module_restates_a_default():
    found = []
    for path in sorted(PKG.rglob("*.py")):
        if path == Path(defaults.__file__).resolve():
            continue
        found += restatements(path.read_text(encoding="utf-8"), str(path.relative_to(PKG)))
    assert not found, "\n".join(found)


def test_a_restated_default_is_found():
    src = '''
MAX_TURNS = 8
def run(max_turns=8, *, temperature=0.0, seed=0): ...
class C:
    timeout_s: float = 10.0
p.add_argument("--max-turns", type=int, default=8)
Sampling(temperature=0.0, max_tokens=768)
CheckJob(timeout_s=12.5)
out = "dist/capa"
'''
    found = restatements(src, "x.py")
    assert [f.split(": ", 1)[0] for f in found] == ["x.py:2", "x.py:3", "x.py:3", "x.py:5", "x.py:6", "x.py:7",
                                                    "x.py:7", "x.py:9"], found


def test_defaults_are_grouped_and_commented():
    text = Path(defaults.__file__).read_text(encoding="utf-8")
    assert text.count("# ---") >= 6
    assert defaults.SANDBOX_LIMITS.timeout_s > 0 and defaults.SANDBOX_LIMITS.memory_mb > 0
