"""Benchmark: the whole offline dataset build (Stages 1-3 + parquet + card) on this machine.

Target: 60 s or less on 2 cores. Also checks that a second build is byte-identical.
Writes bench-results/build.json.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from capa_hf.dataset.build import build_dataset


def tree_digest(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        t0 = time.perf_counter()
        build_dataset(a, seed=0, progress=False)
        first = time.perf_counter() - t0
        t1 = time.perf_counter()
        build_dataset(b, seed=0, progress=False)
        second = time.perf_counter() - t1
        identical = tree_digest(a) == tree_digest(b)
    result = {"build_s_first": round(first, 2), "build_s_second": round(second, 2), "target_s": 60,
              "byte_identical": identical, "cores": os.cpu_count()}
    Path("bench-results").mkdir(exist_ok=True)
    Path("bench-results/build.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"dataset build: {first:.1f} s (second run {second:.1f} s, target <= 60 s), "
          f"byte-identical rebuild: {identical}")


if __name__ == "__main__":
    main()
