"""The job limits' defaults live in sandbox/config.py (JobLimits, JOB_LIMITS): the pool, the
jobs, the rlimits and the command line read them, and no other module writes them again."""
from __future__ import annotations

import ast
from pathlib import Path

import sandbox
from sandbox.cli import build_parser
from sandbox.config import JOB_LIMITS, JobLimits
from sandbox.limits import Limits
from sandbox.pool import CheckJob, SandboxPool

PKG = Path(sandbox.__file__).resolve().parent
OPTIONS = {"--timeout": "timeout_s", "--memory-mb": "memory_mb"}


def _is_literal(node) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def restated(source: str, where: str) -> list[str]:
    """Literal defaults of a job limit: a parameter or field named timeout_s / memory_mb, or the
    CLI's --timeout / --memory-mb."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            found += [f"{where}:{d.lineno}: parameter {arg.arg}" for arg, d in pairs
                      if d is not None and arg.arg in ("timeout_s", "memory_mb") and _is_literal(d)]
        if isinstance(node, ast.ClassDef):
            found += [f"{where}:{s.lineno}: field {s.target.id}" for s in node.body
                      if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                      and s.target.id in ("timeout_s", "memory_mb") and s.value is not None and _is_literal(s.value)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in OPTIONS:
                found += [f"{where}:{k.lineno}: option {node.args[0].value}" for k in node.keywords
                          if k.arg == "default" and _is_literal(k.value)]
    return found


def test_no_module_but_config_restates_a_job_limit():
    found = []
    for path in sorted(PKG.glob("*.py")):
        if path.name != "config.py":
            found += restated(path.read_text(encoding="utf-8"), path.name)
    assert not found, "\n".join(found)


def test_a_restated_job_limit_is_found():
    src = ("def check(code, timeout_s=10.0, *, memory_mb=1024, retries=3): ...\n"
           "class Job:\n    timeout_s: float = 10.0\n    name: str = 'x'\n"
           "p.add_argument('--memory-mb', type=int, default=1024)\np.add_argument('--workers', default=2)\n")
    assert [f.split(": ", 1)[0] for f in restated(src, "x.py")] == ["x.py:1", "x.py:1", "x.py:3", "x.py:5"]


def test_every_default_is_the_configs():
    assert JOB_LIMITS == JobLimits()
    job, limits = CheckJob("c", "t", "f"), Limits()
    assert (job.timeout_s, job.memory_mb) == (limits.timeout_s, limits.memory_mb) == (JOB_LIMITS.timeout_s,
                                                                                       JOB_LIMITS.memory_mb)
    args = build_parser().parse_args(["run", "prog.py"])
    assert (args.timeout, args.memory_mb) == (JOB_LIMITS.timeout_s, JOB_LIMITS.memory_mb)
    import inspect

    for fn in (SandboxPool.check, SandboxPool.run, sandbox.pool.check, sandbox.pool.run):
        params = inspect.signature(fn).parameters
        assert (params["timeout_s"].default, params["memory_mb"].default) == (JOB_LIMITS.timeout_s,
                                                                              JOB_LIMITS.memory_mb), fn
