"""Command line used by the pool to start a worker in a fresh, isolated interpreter."""
from __future__ import annotations

import os
import sys

# The folder that holds the sandbox package (this file sits in it), put first on the worker's path.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from sandbox.worker import main; main(sys.argv[2:])"
)

# LD_BIND_NOW: the dynamic linker resolves every library call when the worker starts.
# With lazy binding, each sandboxed child would resolve (and copy-on-write the GOT for)
# every libc function that the zygote itself never called: ~15 page faults per function.
WORKER_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "LD_BIND_NOW": "1"}


def worker_argv(cmd_fd: int, res_fd: int, cfg_json: str) -> list[str]:
    return [sys.executable, "-I", "-c", BOOT, PACKAGE_PARENT, str(cmd_fd), str(res_fd), cfg_json]
