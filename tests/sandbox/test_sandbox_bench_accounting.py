"""bench/fork_floor.py counts each job once: its rate is only a ceiling if the count is right.

(Its lanes used to share a job counter under an flock that every lane held through one open
file description, which excludes nothing: rounds reported 165, 170 and 182 of 164 passed.)
"""
from __future__ import annotations

import importlib.util
import marshal
import os

import sandbox

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(sandbox.__file__)))   # (bench/ lies next to sandbox/)


def _fork_floor():
    spec = importlib.util.spec_from_file_location("fork_floor", os.path.join(ROOT, "bench", "fork_floor.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_job_runs_exactly_once_per_round():
    floor = _fork_floor()
    programs = [f"x = {i}\nassert x % 5 != 0\n" for i in range(200)]   # 40 of them fail
    blobs = [marshal.dumps(compile(p, "<program>", "exec")) for p in programs]
    cpus = sorted(os.sched_getaffinity(0))
    for _ in range(5):
        out = floor.run_round(blobs, cpus)
        assert (out["runs"], out["once"], out["passed"], out["n"]) == (200, True, 160, 200), out
