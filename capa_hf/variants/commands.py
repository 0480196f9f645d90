"""`capa regen-tests`: regenerate the committed variant tests (or check that they are current)."""

from __future__ import annotations

import sys
from typing import Sequence

from capa_hf.content import load_dimensions, load_variant_sources
from capa_hf.errors import CapaError
from capa_hf.humaneval import load_tasks
from capa_hf.variants.combos import task_variants
from capa_hf.variants.regenerate import regenerate
from capa_hf.variants.store import dump, read_tests, write_tests


def _select(sources: dict, task_ids: Sequence[str] | None) -> dict:
    if not task_ids:
        return sources
    wanted = [t if t.startswith("HumanEval/") else f"HumanEval/{t}" for t in task_ids]
    unknown = [t for t in wanted if t not in sources]
    if unknown:
        raise CapaError(f"--tasks {unknown}: no variants file for these tasks "
                        f"(capa_hf/data/variants/<task>.yaml); {len(sources)} tasks have one")
    return {t: sources[t] for t in wanted}


def regen_tests(task_ids: Sequence[str] | None = None, check: bool = False, quiet: bool = False) -> int:
    """Write (or with `check`, only compare) the regenerated tests; 0 when all is well."""
    from sandbox import SandboxPool

    dims = load_dimensions()
    sources = _select(load_variant_sources(dimensions=dims), task_ids)
    tasks = load_tasks()
    say = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    with SandboxPool() as pool:
        results = regenerate(sources, tasks, dims, pool, progress=say)
    failed, stale = [], []
    for tid, res in results.items():
        if res.errors:
            failed.append(tid)
            for e in res.errors:
                print(f"{tid}: {e}")
            continue
        record = res.to_json(task_variants(sources[tid], dims))
        if check:
            old = read_tests(tid)
            if old is None or dump(old) != dump(record):
                stale.append(tid)
        else:
            write_tests(record)
    if check and stale:
        print(f"{len(stale)} task(s) have stale or missing regenerated tests: {', '.join(stale)}; "
              f"run `capa regen-tests`")
    done = len(results) - len(failed)
    say(f"{'checked' if check else 'regenerated'} {done} task(s); {len(failed)} failed")
    return 1 if failed or stale else 0


def regen_ties(task_ids: Sequence[str] | None = None, check: bool = False, quiet: bool = False) -> int:
    """`capa regen-ties`: write (or with `check`, only compare) the failure ties of every variant
    test (capa_hf/variants/ties.py); 0 when all is well."""
    import json

    from sandbox import SandboxPool

    from capa_hf.simulator.user_data import ties_file
    from capa_hf.variants.store import variant_tests_of
    from capa_hf.variants.ties import compute_ties, write_ties

    dims = load_dimensions()
    sources = _select(load_variant_sources(dimensions=dims), task_ids)
    tests = {}
    for tid in sources:
        record = read_tests(tid)
        if record is None:
            raise CapaError(f"{tid}: no regenerated tests; run `capa regen-tests --tasks {tid}` first")
        tests[tid] = variant_tests_of(record)
    say = (lambda m: None) if quiet else (lambda m: print(m, file=sys.stderr))
    with SandboxPool() as pool:
        records = compute_ties(sources, load_tasks(), dims, tests, pool, progress=say)
    stale = []
    for tid, rec in records.items():
        if check:
            path = ties_file(tid)
            old = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
            if old is None or dump(old) != dump(rec):
                stale.append(tid)
        else:
            write_ties(rec)
    unreported = sum(len(r["unreported"]) for r in records.values())
    if check and stale:
        print(f"{len(stale)} task(s) have stale or missing failure ties: {', '.join(stale)}; run `capa regen-ties`")
    say(f"{'checked' if check else 'wrote'} the failure ties of {len(records)} task(s); "
        f"{unreported} alternative run(s) reported nothing (timeout or crash; listed in each file)")
    return 1 if stale else 0
