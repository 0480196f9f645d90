"""Failure ties: which hidden items each line of a variant test tells apart, found in the sandbox.

For every variant of a task, every *alternative* runs against the variant's test:
- for each dimension, the variant's reference under each other value of that dimension;
- for each curated misreading, the variant's misreading of that keypoint.
The test's `check` body is run statement by statement (each in its own try, so one failure does
not hide the next), and a statement that the alternative fails ties that alternative's ref (the
dimension id, or the keypoint id) to every source line of the statement. After a failed
submission the scripted user looks up the failing line and reveals a hidden item tied to it.

Written to capa_hf/data/variant_ties/<task>.json by `capa regen-ties`; stale when the variant
tests change (the record keeps their hash).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from typing import Mapping

from capa_hf.schema.convention import Dimension, VariantSource
from capa_hf.simulator.value_signature import SIGNATURE_SOURCE
from capa_hf.variants.combos import Variant, task_variants
from capa_hf.variants.store import dump, tests_file

TIES_VERSION = 1
JOB_TIMEOUT_S = 20.0
MARK = "CAPA_TIES "
_RESULT = re.compile(re.escape(MARK) + r"(\[[0-9,]*\])")

def check_statements(test: str) -> list[tuple[int, int]]:
    """(first line, last line), 1-based, of every top-level statement of `check`'s body."""
    tree = ast.parse(test)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check":
            return [(s.lineno, s.end_lineno or s.lineno) for s in node.body]
    raise ValueError("the test defines no check(candidate)")


def probing_test(test: str) -> str:
    """The test with `check` rewritten to run every statement, collect the failing ones by
    index, and report them in one AssertionError (the trusted test's own failure message)."""
    lines = test.splitlines()
    spans = check_statements(test)
    tree = ast.parse(test)
    check = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    head = lines[: check.lineno - 1]
    arg = check.args.args[0].arg if check.args.args else "candidate"
    body = [*SIGNATURE_SOURCE.strip("\n").splitlines(), "", "",
            "def check(_capa_real):", "    _capa_failed = []", "    _capa_seen = {}", "    _capa_at = [0]", "",
            f"    def {arg}(*args, **kwargs):",
            "        try:",
            "            value = _capa_real(*args, **kwargs)",
            "        except BaseException as exc:",
            "            _capa_seen[_capa_at[0]] = 'raise:' + type(exc).__name__",
            "            raise",
            "        _capa_seen[_capa_at[0]] = _capa_signature(value)",
            "        return value", ""]
    for i, (a, b) in enumerate(spans):
        stmt = lines[a - 1: b]
        indent = len(stmt[0]) - len(stmt[0].lstrip())
        body += [f"    _capa_at[0] = {i}", "    try:"]
        body += ["        " + s[indent:] for s in stmt]
        body += ["    except BaseException:", f"        _capa_failed.append({i})"]
    body += ["    _capa_out = ''",                   # the failure message holds 2000 characters at most
             "    for _capa_i in _capa_failed:",
             "        _capa_one = ' %d=%s' % (_capa_i, _capa_seen.get(_capa_i, '-'))",
             "        if len(_capa_out) + len(_capa_one) > 1700:",
             "            break",
             "        _capa_out += _capa_one",
             f"    raise AssertionError({MARK!r} + repr(_capa_failed).replace(' ', '') + _capa_out)"]
    tail = lines[(check.end_lineno or len(lines)):]
    return "\n".join(head + body + tail) + "\n"


def failed_statements(verdict) -> list[int] | None:
    """The statement indices a probing run reports, or None when it did not report."""
    failure = verdict.failure
    m = _RESULT.search(failure.message) if failure is not None else None
    return json.loads(m.group(1)) if m else None


def statement_values(verdict) -> dict[int, str]:
    """Failing statement index -> the signature of the last value (or exception) the candidate
    gave in it, as far as the failure message had room."""
    message = verdict.failure.message if verdict.failure is not None else ""
    if MARK not in message:
        return {}
    out = {}
    for part in message.split(MARK, 1)[1].split()[1:]:
        i, _, sig = part.partition("=")
        if i.isdigit() and sig != "-":
            out[int(i)] = sig
    return out


def alternatives(variant: Variant, source: VariantSource, dimensions: Mapping[str, Dimension]) -> list[tuple[str, str]]:
    """(ref, code) for every other value of each dimension and every misreading."""
    out = []
    for d, value in variant.values:
        for other in dimensions[d].value_ids():
            if other != value:
                out.append((d, variant.with_value(d, other).reference))
    for kp in sorted(source.misreadings):
        out.append((kp, variant.misreading(kp)))
    return out


def tests_sha256(task_id: str) -> str:
    path = tests_file(task_id)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def compute_ties(sources: Mapping[str, VariantSource], tasks: Mapping, dimensions: Mapping[str, Dimension],
                 tests: Mapping[str, Mapping[str, str]], pool, progress=None) -> dict[str, dict]:
    """The ties record of every task in `sources`; `tests[task][variant key]` is the variant test."""
    from sandbox import CheckJob

    jobs, where = [], []
    for tid, src in sources.items():
        for v in task_variants(src, dimensions):
            test = tests[tid].get(v.key)
            if test is None:
                continue
            probe = probing_test(test)
            for ref, code in alternatives(v, src, dimensions):
                jobs.append(CheckJob(code, probe, tasks[tid].entry_point, timeout_s=JOB_TIMEOUT_S,
                                     prelude=tasks[tid].prompt))
                where.append((tid, v.key, ref, test))
    verdicts = pool.check_many(jobs)
    if progress:
        progress(f"ran {len(jobs)} alternatives against their variant tests")
    records: dict[str, dict] = {tid: {"task_id": tid, "ties_version": TIES_VERSION, "tests_sha256": tests_sha256(tid),
                                      "variants": {}, "unreported": []} for tid in sources}
    for (tid, key, ref, test), verdict in zip(where, verdicts):
        failed = failed_statements(verdict)
        rec = records[tid]
        if failed is None:        # it timed out or crashed the run: nothing is tied to it
            rec["unreported"].append(f"{key} {ref}: {verdict.status}")
            continue
        values = statement_values(verdict)
        lines = test.splitlines()
        spans = check_statements(test)
        table = rec["variants"].setdefault(key, {})
        for i in failed:
            a, b = spans[i]
            for text in lines[a - 1: b]:
                text = text.strip()
                if text and text not in ("try:", "else:", "pass"):
                    sigs = table.setdefault(text, {}).setdefault(ref, [])
                    if values.get(i) not in sigs:           # a dimension with three values has two alternatives
                        sigs.append(values.get(i))
    for rec in records.values():
        rec["variants"] = {k: {line: {r: sorted(sigs, key=str) for r, sigs in sorted(refs.items())}
                               for line, refs in sorted(t.items())}
                           for k, t in sorted(rec["variants"].items())}
        rec["unreported"] = sorted(rec["unreported"])
    return records


def write_ties(record: dict, folder=None):
    from capa_hf.simulator.user_data import ties_file

    path = ties_file(record["task_id"], folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = dump(record)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path
