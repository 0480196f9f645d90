"""The committed regenerated tests: capa_hf/data/variant_tests/<task>.json, one file per task.

Written by `capa regen-tests`, read by the build, the judge and `capa validate-content`, so the
build stays offline, fast and byte-identical.
"""

from __future__ import annotations

import json
from pathlib import Path

from capa_hf.errors import DataFileError
from capa_hf.paths import DATA_DIR

TESTS_DIR = DATA_DIR / "variant_tests"


def tests_file(task_id: str, folder: Path | None = None) -> Path:
    return (folder or TESTS_DIR) / f"{task_id.replace('/', '_')}.json"


def dump(record: dict) -> str:
    return json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def write_tests(record: dict, folder: Path | None = None) -> Path:
    path = tests_file(record["task_id"], folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dump(record)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return path


def read_tests(task_id: str, folder: Path | None = None) -> dict | None:
    path = tests_file(task_id, folder)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, f"not valid JSON: {exc}") from None
    if not isinstance(record, dict) or record.get("task_id") != task_id or not isinstance(record.get("variants"), list):
        raise DataFileError(path, f"expected a regenerated-tests record for {task_id}")
    return record


def variant_tests_of(record: dict) -> dict[str, str]:
    return {v["key"]: v["test"] for v in record["variants"]}
