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
