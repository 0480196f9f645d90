"""runners/ is generic LLM machinery: it must not import the benchmark's packages."""

import ast
from pathlib import Path

import runners

FORBIDDEN = {"capa_hf", "sandbox"}


def test_runners_does_not_import_capa_or_sandbox():
    pkg = Path(runners.__file__).resolve().parent
    offenders = []
    for path in sorted(pkg.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                if name.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.name}:{node.lineno} imports {name}")
    assert not offenders, offenders


def test_public_names():
    for name in ("Sampling", "ChatRequest", "ChatResult", "Engine", "make_engine", "run_episodes", "Call",
                 "EpisodeOutcome", "CompletionCache", "RunStats", "Usage"):
        assert hasattr(runners, name), name
