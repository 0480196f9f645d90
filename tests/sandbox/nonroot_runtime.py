"""Running sandbox code as an unprivileged user (uid/gid 65534) from a root process.

Shared by test_sandbox_nonroot.py (jobs driven by nonroot_driver.py as that user) and by
suite_as_nobody.py, the CI step that re-runs the whole sandbox test suite as that user
(`make test` runs it after pytest).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys

NOBODY = 65534
HERE = os.path.dirname(os.path.abspath(__file__))


def sandbox_dir() -> str:
    return os.path.dirname(os.path.abspath(importlib.util.find_spec("sandbox").origin))


def as_nobody(argv, pythonpath: str | None = None, **kw) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(argv, user=NOBODY, group=NOBODY, extra_groups=[], cwd="/", env=env,
                          capture_output=True, text=True, **kw)


def make_readable(root: str) -> None:
    """Let any user read everything below ``root`` (and enter its directories)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)


def interpreter() -> str | None:
    """A Python >= 3.11 that uid 65534 can run (ours may live under a private home)."""
    names = [os.path.realpath(sys.executable), f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
             "/usr/local/bin/python3", "/usr/bin/python3"]
    for exe in dict.fromkeys(names):
        if not os.path.exists(exe):
            continue
        try:
            r = as_nobody([exe, "-I", "-c", "import sys; print(sys.version_info >= (3, 11))"], timeout=60)
        except PermissionError:  # e.g. under a home directory only its owner may enter
            continue
        if r.returncode == 0 and r.stdout.strip() == "True":
            return exe
    return None


def copy_runtime(root: str) -> None:
    """The ``sandbox`` package, ``pyseccomp``, the driver and the fork-floor bench under ``root``."""
    src = sandbox_dir()
    shutil.copytree(src, os.path.join(root, "sandbox"), ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(importlib.util.find_spec("pyseccomp").origin, root)
    shutil.copy(os.path.join(HERE, "nonroot_driver.py"), root)
    os.makedirs(os.path.join(root, "bench"))   # (for the fork floor's accounting test)
    shutil.copy(os.path.join(os.path.dirname(src), "bench", "fork_floor.py"), os.path.join(root, "bench"))
    make_readable(root)
