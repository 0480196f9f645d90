"""Command line used by the pool to start a worker in a fresh, isolated interpreter."""
from __future__ import annotations

import os
import sys

import sandbox

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(sandbox.__file__)))

BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from sandbox.worker import main; main(sys.argv[2:])"
)

WORKER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


def worker_argv(cmd_fd: int, res_fd: int, cfg_json: str) -> list[str]:
    return [sys.executable, "-I", "-c", BOOT, PACKAGE_PARENT, str(cmd_fd), str(res_fd), cfg_json]
