"""What empty input gives under `empty_input=neutral`, and whether a reader can know it.

The user's neutral habit ("the empty version of the answer") names a value only where the natural
empty result is the empty container, `0` or `""`. For a task whose empty result is a bool, a
sentinel such as -1, or anything else, the habit cannot tell which: Stage 1 hides the neutral
value in a held-out session only if the same user's history showed the neutral value for a task
of the same return kind (`stage1_plan`). The results are data (capa_hf/data/empty_results.yaml),
re-run in the sandbox by `capa validate-content`.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from capa_hf.data_files import read_yaml
from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR

KNOWABLE = ("empty container", "zero", "empty string")


def result_kind(result: object) -> str:
    """'empty container', 'zero', 'empty string' (knowable) or 'bool', 'sentinel', 'other'."""
    if isinstance(result, bool):
        return "bool"
    if isinstance(result, (list, tuple, dict, set)) and not result:
        return "empty container"
    if isinstance(result, str):
        return "empty string" if result == "" else "other"
    if isinstance(result, int):
        return "zero" if result == 0 else "sentinel"
    return "other"


def knowable(kind: str | None) -> bool:
    return kind is None or kind in KNOWABLE


@lru_cache(maxsize=4)
def load_empty_results(path: Path | None = None) -> dict[str, tuple[str, object]]:
    """task id -> (the call with empty input, the neutral reference's result)."""
    path = path or DATA_DIR / "empty_results.yaml"
    raw = read_yaml(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("tasks"), dict):
        raise DataFileError(path, "expected a top-level 'tasks' mapping", field="tasks")
    out = {}
    for tid, entry in raw["tasks"].items():
        if not isinstance(entry, dict) or not {"call", "result"} <= set(entry):
            raise DataFileError(path, "expected call and result", field=f"tasks.{tid}")
        try:
            out[tid] = (str(entry["call"]), ast.literal_eval(str(entry["result"])))
        except (ValueError, SyntaxError):
            raise DataFileError(path, f"result {entry['result']!r} is not a Python literal",
                                field=f"tasks.{tid}.result") from None
    return out


def empty_kinds(path: Path | None = None) -> dict[str, str]:
    """task id -> the return kind of its natural empty result."""
    return {tid: result_kind(res) for tid, (_, res) in load_empty_results(path).items()}


# the kinds whose neutral result a request names outright; an empty container keeps the
# dimension's own lines (its type follows the container convention); any other result (a count of
# 1 for two empty strings, -1, a hash) gets the `state_other` lines, which name no value
NAMED_KINDS = ("bool", "zero", "empty string")


def _forms(raw, key: str, path, slot: str | None) -> list[str]:
    forms = raw.get(key)
    if not isinstance(forms, list) or not forms or not all(
            isinstance(f, str) and (slot is None or slot in f) for f in forms):
        raise DataFileError(path, f"expected {key!r}: a list of phrasings" + (f" with a {slot} slot" if slot else ""),
                            field=key)
    return forms


@lru_cache(maxsize=4)
def neutral_state_forms(task_id: str, path: Path | None = None) -> tuple[str, ...]:
    """How a request states empty_input=neutral for this task when its empty result is not an
    empty container: the `state` forms of empty_results.yaml with {empty} filled ("False", "0",
    "an empty string"), or the `state_other` forms; () for an empty container or an unknown task
    (the dimension's own lines apply)."""
    path = path or DATA_DIR / "empty_results.yaml"
    entry = load_empty_results(path).get(task_id)
    if entry is None:
        return ()
    kind = result_kind(entry[1])
    if kind == "empty container":
        return ()
    raw = read_yaml(path)
    if kind not in NAMED_KINDS:
        return tuple(_forms(raw, "state_other", path, None))
    empty = "an empty string" if kind == "empty string" else repr(entry[1])
    return tuple(f.replace("{empty}", empty) for f in _forms(raw, "state", path, "{empty}"))


def empty_result_jobs(sources, tasks, dims, path: Path | None = None) -> list[tuple[str, object, object]]:
    """(task id, expected result, CheckJob) per task: the neutral reference on the empty call must
    return the recorded result (the check raises nothing then)."""
    from sandbox import CheckJob

    from capa_hf.variants.combos import task_variants

    out = []
    for tid, (call, result) in load_empty_results(path).items():
        src = sources[tid]
        variant = next(v for v in task_variants(src, dims) if dict(v.values) == {
            **dict(src.dimensions), "empty_input": "neutral"})
        test = f"def check(candidate):\n    assert candidate({call}) == {result!r}\n"
        out.append((tid, result, CheckJob(variant.reference, test, tasks[tid].entry_point, prelude=tasks[tid].prompt)))
    return out
