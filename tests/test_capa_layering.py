"""capa_hf's layers: every module imports only its own part and the layers below it.

From the ground up (a module may import its own part and any lower layer, never a part beside
it on its own layer, never a higher layer; function-local imports count):

    base        the schema, errors, defaults, paths, prompts, data files, the registry, and the
                shared helpers that generation and the simulator both use (seeding, LLM-JSON answers)
    simulator   the episode, simulated users, judges (knows no dataset and no run)
    content     the curated data and its loaders: HumanEval, keypoints, personas, the cell
                design, presets, task variants
    generation  Stages 1-3 and keypoint drafting  |  memory  the memory systems
    dataset     building, loading, checking and publishing the dataset (its build runs generation)
    evaluation  conditions, the run loop, records, metrics, summaries (it loads the dataset)
    analysis    reports, tables, paired statistics, frames over finished runs
    cli         the command line and the demo
"""
from __future__ import annotations

import pytest

from tests.import_graph import graph, modules

# layer -> its parts -> module prefixes (a prefix "capa_hf.x" covers capa_hf.x and capa_hf.x.*)
LAYERS: list[tuple[str, dict[str, tuple[str, ...]]]] = [
    ("base", {"base": ("capa_hf.__init__", "capa_hf.version", "capa_hf.errors", "capa_hf.defaults",
                       "capa_hf.paths", "capa_hf.registry", "capa_hf.prompts", "capa_hf.data_files",
                       "capa_hf.text_literals", "capa_hf.seeding", "capa_hf.llm_json", "capa_hf.oracle", "capa_hf.specs", "capa_hf.conventions",
                       "capa_hf.schema")}),
    ("simulator", {"simulator": ("capa_hf.simulator",)}),
    ("content", {"content": ("capa_hf.content", "capa_hf.humaneval", "capa_hf.design", "capa_hf.presets",
                             "capa_hf.variants")}),
    ("generation", {"generation": ("capa_hf.generation", "capa_hf.keypoint_extraction"),
                    "memory": ("capa_hf.memory",)}),
    ("dataset", {"dataset": ("capa_hf.dataset",)}),
    ("evaluation", {"evaluation": ("capa_hf.evaluation",)}),
    # validate-content checks the whole dataset, the simulated user's fidelity included (it plays
    # the evaluator's user on held-out sessions), so it sits with the analyses
    ("analysis", {"analysis": ("capa_hf.analysis", "capa_hf.results"),
                  "checks": ("capa_hf.validate_content", "capa_hf.user_fidelity")}),
    ("view", {"view": ("capa_hf.view",)}),
    ("cli", {"cli": ("capa_hf.cli", "capa_hf.__main__", "capa_hf.demo", "capa_hf.listing")}),
]


def _covers(prefix: str, module: str) -> bool:
    if prefix == "capa_hf.__init__":
        return module == "capa_hf"
    return module == prefix or module.startswith(prefix + ".")


def place(module: str) -> tuple[int, str]:
    """(layer index, part) of a capa_hf module; KeyError when no layer claims it."""
    hits = [(i, part) for i, (_, parts) in enumerate(LAYERS) for part, prefixes in parts.items()
            if any(_covers(p, module) for p in prefixes)]
    if len(hits) != 1:
        raise KeyError(f"{module}: claimed by {hits or 'no layer'}")
    return hits[0]


def capa_modules() -> list[str]:
    return sorted(m for m in modules() if m == "capa_hf" or m.startswith("capa_hf."))


def violations(edges) -> list[str]:
    out = []
    for module in capa_modules():
        level, part = place(module)
        for target in sorted(edges[module]):
            if not target.startswith("capa_hf"):
                continue
            t_level, t_part = place(target)
            if t_level > level:
                out.append(f"{module} ({LAYERS[level][0]}) imports {target} ({LAYERS[t_level][0]}): upward")
            elif t_level == level and t_part != part:
                out.append(f"{module} ({part}) imports {target} ({t_part}): sideways")
    return out


def test_every_module_has_exactly_one_layer():
    unplaced = []
    for m in capa_modules():
        try:
            place(m)
        except KeyError as exc:
            unplaced.append(str(exc))
    assert not unplaced, unplaced


def test_modules_import_only_their_part_and_lower_layers():
    bad = violations(graph())
    assert not bad, "\n".join(bad)


def test_a_layer_violation_is_found():
    fake = {m: frozenset() for m in capa_modules()}
    fake["capa_hf.evaluation.run"] = frozenset({"capa_hf.analysis.tables"})
    fake["capa_hf.memory.amem"] = frozenset({"capa_hf.generation.pipeline"})
    bad = violations(fake)
    assert any("capa_hf.evaluation.run" in v and "upward" in v for v in bad)
    assert any("capa_hf.memory.amem" in v and "sideways" in v for v in bad)
    with pytest.raises(KeyError):
        place("capa_hf.nowhere")


def test_runners_and_sandbox_import_nothing_of_capa_hf():
    bad = [f"{m} imports {t}" for m, ts in graph().items() if m.split(".")[0] in ("runners", "sandbox")
           for t in ts if t.split(".")[0] == "capa_hf"]
    assert not bad, bad


def test_no_module_imports_a_private_name_from_another():
    import ast

    bad = []
    for module in capa_modules():
        path = modules()[module]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in
                                                     ("capa_hf", "runners", "sandbox")):
                bad += [f"{module}:{node.lineno} imports {a.name} from {node.module}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad
