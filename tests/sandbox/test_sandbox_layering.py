"""sandbox/ layering: what runs in the untrusted child, the zygote, the trusted judge and the
caller's process, and what each may import. Like runners/, it imports nothing of CAPA."""
from __future__ import annotations

import ast
from pathlib import Path

import sandbox

PKG = Path(sandbox.__file__).resolve().parent
OUTSIDE_FORBIDDEN = {"capa_hf", "runners"}

# Pure data and formats, usable everywhere.
SHARED = {"config", "limits", "verdict", "protocol", "plaindata", "outcome", "preload"}
# Runs inside the untrusted child (imported by the zygote, which prepares it).
CHILD = {"harness", "child_env"}
# The zygote: forks children, sets up namespaces, mounts, seccomp.
ZYGOTE = {"zygote", "zygote_layers", "scratch", "namespaces", "seccomp_filter"}
# The trusted judge in the worker: never the child's code, never the zygote's.
JUDGE = {"judge", "testcode", "program", "remote", "prefetch", "session", "spawner", "compile_helper", "cgroups"}
# The worker process's entry point wires the judge to the zygote it forks.
WORKER = {"worker"}
# The caller's process: the pool and the command line, which talk to workers only through frames.
CALLER = {"pool", "cli", "_boot", "__init__", "__main__"}

ALLOWED = {
    **{m: SHARED for m in SHARED},
    **{m: SHARED | CHILD for m in CHILD},
    **{m: SHARED | CHILD | ZYGOTE for m in ZYGOTE},
    **{m: SHARED | JUDGE | {"namespaces"} for m in JUDGE},   # (compile_helper: the death signal)
    **{m: SHARED | JUDGE | ZYGOTE | WORKER for m in WORKER},
    **{m: SHARED | CALLER for m in CALLER},
}


def _imports(path: Path) -> tuple[set[str], list[str]]:
    """(sandbox modules imported, top-level packages imported from outside) by one file."""
    inner, outer = set(), []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                parts = a.name.split(".")
                if parts[0] == "sandbox":
                    inner.add(parts[1] if len(parts) > 1 else "__init__")
                else:
                    outer.append(parts[0])
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] != "sandbox":
                    outer.append(parts[0])
                    continue
                parts = parts[1:]
            else:
                parts = (node.module or "").split(".") if node.module else []
            if parts:
                inner.add(parts[0])
            else:
                inner |= {a.name for a in node.names}
    return inner, outer


def test_every_module_has_a_layer():
    modules = {p.stem for p in PKG.glob("*.py")}
    assert modules == set(ALLOWED), (modules - set(ALLOWED), set(ALLOWED) - modules)


def test_modules_import_only_their_layer_and_below():
    offenders = []
    for path in sorted(PKG.glob("*.py")):
        inner, _ = _imports(path)
        bad = inner - ALLOWED[path.stem] - {path.stem}
        offenders += [f"{path.name} imports sandbox.{m}" for m in sorted(bad)]
    assert not offenders, offenders


def test_sandbox_imports_nothing_of_capa():
    offenders = [f"{path.name} imports {name}" for path in sorted(PKG.glob("*.py"))
                 for name in _imports(path)[1] if name in OUTSIDE_FORBIDDEN]
    assert not offenders, offenders


def test_no_file_is_over_450_lines():
    long = {p.name: n for p in PKG.glob("*.py") if (n := len(p.read_text().splitlines())) > 450}
    assert not long, long
