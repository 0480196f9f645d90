"""Runs sandbox jobs as whoever starts it and prints one JSON report (see test_sandbox_nonroot.py).

    python nonroot_driver.py PACKAGE_DIR < request.json

``PACKAGE_DIR`` holds the ``sandbox`` package and ``pyseccomp.py`` (readable by this user).
The request: {"config": {...SandboxConfig fields}, "busy": N, "jobs": [[name, code, test,
entry_point], ...]}. With ``busy`` > 0, N idle processes of this user are started first and
must all still be alive at the end (an account where other work runs, e.g. an inference
server with many threads).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys


def zygote_children(zygote_pid: int) -> list[int]:
    kids: list[int] = []
    for tid in os.listdir(f"/proc/{zygote_pid}/task"):
        with open(f"/proc/{zygote_pid}/task/{tid}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids


def main() -> int:
    sys.path.insert(0, sys.argv[1])
    from sandbox import CheckJob, SandboxConfig, SandboxPool

    req = json.load(sys.stdin)
    sleepers = [subprocess.Popen(["sleep", "300"]) for _ in range(int(req.get("busy", 0)))]
    out: dict = {"uid": os.getuid()}
    try:
        with SandboxPool(workers=1, config=SandboxConfig(**req.get("config", {}))) as pool:
            info = pool.worker_info()[0]
            out["layers"] = info["layers"]
            out["notes"] = info["notes"]
            jobs = req["jobs"]
            verdicts = pool.check_many([CheckJob(code, test, entry) for _, code, test, entry in jobs])
            out["results"] = {name: {"status": v.status, "failure": v.failure.type if v.failure else None,
                                     "message": v.failure.message if v.failure else None,
                                     "stdout": v.stdout}
                              for (name, *_), v in zip(jobs, verdicts)}
            live = pool.worker_info(live=True)[0]
            out["zygote_children"] = len(zygote_children(live["zygote_pid"]))
            out["spare"] = live.get("spare_pid") is not None
            out["workers_replaced"] = live["zygote_pid"] != info["zygote_pid"]
            out["scratch_left"] = sorted(set(os.listdir(live["scratch_base"])) - {live.get("spare_scratch")})
        out["sleepers_alive"] = sum(p.poll() is None for p in sleepers)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
