"""Each isolation layer, examined on its own (the other layers switched off where that matters)."""
from __future__ import annotations

import errno
import os

import pytest
from sandbox_testlib import IS_ROOT, PRIVILEGED, needs_privilege, only

from sandbox import SandboxConfig
from sandbox.zygote import SAFE_ENV

MiB = 1024 * 1024


def probe(p, body: str, timeout_s: float = 5.0, memory_mb: int = 300):
    """Run `body` (which sets `out`) in the sandbox; return (verdict, printed repr of out)."""
    code = ("def f(x):\n" + "".join(f"    {line}\n" for line in body.splitlines()) +
            "    print(repr(out))\n    return x\n")
    v = p.check(code, "def check(candidate):\n    assert candidate(1) == 1\n", "f",
                timeout_s=timeout_s, memory_mb=memory_mb)
    return v, v.stdout.strip()


def test_rlimits_are_set(pool_factory):
    p = pool_factory("rlimits-only", only())
    body = ("import resource as r\n"
            "out = {n: r.getrlimit(getattr(r, n)) for n in "
            "('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_FSIZE', 'RLIMIT_NOFILE', 'RLIMIT_NPROC', 'RLIMIT_CORE')}")
    v, out = probe(p, body, timeout_s=2.5, memory_mb=300)
    assert v.status == "passed", v
    lim = eval(out)
    cfg = SandboxConfig()
    for soft, hard in lim.values():
        assert soft == hard
    assert lim["RLIMIT_CPU"][0] == 4                      # ceil(2.5) + 1
    assert 300 * MiB < lim["RLIMIT_AS"][0] < 300 * MiB + 512 * MiB
    assert lim["RLIMIT_FSIZE"][0] == cfg.max_file_mb * MiB
    assert lim["RLIMIT_NOFILE"][0] == cfg.max_open_files
    if IS_ROOT:  # (without root and with no namespace in use, RLIMIT_NPROC would count the whole account)
        assert lim["RLIMIT_NPROC"][0] == cfg.max_threads
    else:
        assert any("max_threads" in n for n in p.worker_info()[0]["notes"])
    assert lim["RLIMIT_CORE"][0] == 0
    assert v.layers["rlimits"] is True


def test_file_size_limit_is_enforced(pool_factory):
    p = pool_factory("rlimits-only", only())
    body = ("try:\n"
            "    with open('big', 'wb') as fh:\n"
            "        fh.write(b'x' * (32 * 1024 * 1024))\n"
            "    out = 'wrote'\n"
            "except OSError as e:\n"
            "    out = e.errno")
    v, out = probe(p, body)
    assert out == str(errno.EFBIG)


def test_seccomp_denies_network_and_processes_with_eperm(pool_factory):
    p = pool_factory("seccomp-only", only(seccomp=True))
    body = ("import socket, os, threading\nout = {}\n"
            "for name, fn in [('socket', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)),\n"
            "                 ('unix', lambda: socket.socket(socket.AF_UNIX)),\n"
            "                 ('fork', os.fork),\n"
            "                 ('exec', lambda: os.execv('/bin/true', ['true']))]:\n"
            "    try:\n"
            "        fn()\n"
            "        out[name] = 'allowed'\n"
            "    except OSError as e:\n"
            "        out[name] = e.errno\n"
            "t = threading.Thread(target=lambda: None)\n"
            "t.start(); t.join()\n"
            "out['thread'] = 'ok'")
    v, out = probe(p, body)
    assert v.status == "blocked"  # the attempts are reported even though the function caught them
    assert eval(out) == {"socket": errno.EPERM, "unix": errno.EPERM, "fork": errno.EPERM,
                         "exec": errno.EPERM, "thread": "ok"}
    assert v.layers["seccomp"] is True


def test_without_seccomp_the_same_calls_are_not_blocked(pool_factory):
    p = pool_factory("all-off", only())
    v, out = probe(p, "import socket\ns = socket.socket(socket.AF_UNIX)\ns.close()\nout = 'allowed'")
    assert v.status == "passed" and out == "'allowed'"
    assert v.layers["seccomp"] is False


def test_environment_is_scrubbed(pool_factory):
    assert os.environ.get("CAPA_SANDBOX_TEST_SECRET")
    p = pool_factory("all-off", only())
    v, out = probe(p, "import os\nout = dict(os.environ)")
    assert v.status == "passed"
    assert eval(out) == SAFE_ENV


def test_cwd_is_a_private_empty_scratch_dir(pool_factory):
    p = pool_factory("all-off", only())
    base = p.worker_info()[0]["scratch_base"]
    body = ("import os\nout = (os.getcwd(), sorted(os.listdir('.')))\n"
            "open('mine.txt', 'w').write('x')")
    v, out = probe(p, body)
    cwd, listing = eval(out)
    assert v.status == "passed"
    assert cwd.startswith(base + "/") and listing == []
    v2, out2 = probe(p, body)
    cwd2, listing2 = eval(out2)
    assert cwd2 != cwd and listing2 == []       # a fresh directory each time
    assert not os.path.exists(cwd)              # and the old one is gone


@needs_privilege
def test_uid_is_unprivileged(pool_factory):
    p = pool_factory("uid-only", only(drop_privileges=True))
    body = ("import os\ncaps = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cap')]\n"
            "out = (os.getuid(), os.geteuid(), os.getgid(), os.getegid(), os.getgroups(), caps)")
    v, out = probe(p, body)
    uid, euid, gid, egid, groups, caps = eval(out)
    info = p.worker_info()[0]
    if IS_ROOT:   # a dedicated unused uid, no groups
        assert uid == euid == gid == egid == info["uid"] != 0
        assert uid >= p.config.uid_base and groups == []
    else:         # in a user namespace: the user's own uid, with every capability gone
        assert uid == euid == os.getuid() and info["uid"] is None
        assert v.layers["user_namespace"] is True
    # CapInh, CapPrm, CapEff, CapBnd, CapAmb: nothing permitted, effective or ambient
    assert int(caps[1], 16) == int(caps[2], 16) == int(caps[4], 16) == 0, caps
    assert v.layers["drop_privileges"] is True


@needs_privilege
def test_net_namespace_has_only_loopback(pool_factory):
    p = pool_factory("netns-only", only(net_namespace=True))
    body = ("lines = open('/proc/net/dev').read().splitlines()[2:]\n"
            "out = sorted(l.split(':')[0].strip() for l in lines)")
    v, out = probe(p, body)
    assert v.status == "passed"
    assert eval(out) == ["lo"]
    assert v.layers["net_namespace"] is True


@needs_privilege
def test_pid_namespace_makes_the_submission_pid_1(pool_factory):
    p = pool_factory("pidns-only", only(pid_namespace=True))
    v, out = probe(p, "import os\nout = (os.getpid(), os.getppid())")
    assert eval(out) == (1, 0)
    assert v.layers["pid_namespace"] is True


@needs_privilege
def test_chroot_hides_the_filesystem(pool_factory):
    p = pool_factory("chroot-only", only(chroot=True))
    body = ("import os\nout = [os.getcwd(), os.listdir('/')]\n"
            "for path in ('/etc/passwd', '/proc/self/status', '/usr/bin/env'):\n"
            "    out.append(os.path.exists(path))")
    v, out = probe(p, body)
    assert eval(out) == ["/", [], False, False, False]
    assert v.layers["chroot"] is True


@needs_privilege
def test_scratch_is_a_size_limited_tmpfs(pool_factory):
    p = pool_factory("tmpfs-only", only(scratch_tmpfs=True))
    body = ("import os\nst = os.statvfs('.')\nout = [st.f_blocks * st.f_frsize]\n"
            "try:\n"
            "    for i in range(8):\n"
            "        with open(f'f{i}', 'wb') as fh:\n"
            "            fh.write(b'x' * (15 * 1024 * 1024))\n"
            "    out.append('fits')\n"
            "except OSError as e:\n"
            "    out.append(e.errno)")
    v, out = probe(p, body)
    size, result = eval(out)
    assert size == p.config.scratch_mb * MiB
    assert result == errno.ENOSPC
    assert v.layers["scratch_tmpfs"] is True


def test_session_and_process_group_are_new(pool_factory):
    p = pool_factory("all-off", only())
    v, out = probe(p, "import os\nout = (os.getsid(0) == os.getpid(), os.getpgid(0) == os.getpid())")
    assert eval(out) == (True, True)


def test_imports_beyond_the_preloaded_set_fail_clearly(pool):
    v = pool.check("import xml.dom.minidom\ndef f(x):\n    return x\n",
                   "def check(candidate):\n    assert candidate(1) == 1\n", "f")
    assert v.status == "error"
    assert v.failure.type == "ModuleNotFoundError"
    assert "preloaded" in v.failure.message


def test_common_stdlib_modules_work(pool):
    code = ("import math, re, string, collections, itertools, functools, heapq, bisect, typing, hashlib\n"
            "import random, statistics, fractions, decimal, operator, copy, json, datetime\n"
            "def f(x):\n"
            "    d = datetime.datetime.strptime('2024-01-02', '%Y-%m-%d')\n"
            "    h = hashlib.sha256(b'a').hexdigest()[:4]\n"
            "    c = collections.Counter('abca').most_common(1)[0][0]\n"
            "    return [math.isqrt(x), d.day, h, c, str(fractions.Fraction(1, 3)), 'x'.encode('latin-1'),\n"
            "            json.loads('[1]'), statistics.mean([1, 2, 3]), str(decimal.Decimal('1.5') * 2),\n"
            "            bool(re.match(r'a+', 'aa')), random.random() < 1]\n")
    test = ("import hashlib\n"
            "def check(candidate):\n"
            "    assert candidate(16) == [4, 2, hashlib.sha256(b'a').hexdigest()[:4], 'a', '1/3', b'x',\n"
            "                             [1], 2, '3.0', True, True]\n")
    v = pool.check(code, test, "f")
    assert v.status == "passed", v


def test_children_get_different_random_streams(pool):
    code = "import random\ndef f(x):\n    print(random.getrandbits(64))\n    return x\n"
    test = "def check(candidate):\n    assert candidate(0) == 0\n"
    outs = {pool.check(code, test, "f").stdout for _ in range(4)}
    assert len(outs) == 4


def test_verdict_records_active_layers(pool, pool_factory):
    v = pool.check("def f(x):\n    return x\n", "def check(candidate):\n    assert candidate(1) == 1\n", "f")
    expected_root = {"seccomp", "drop_privileges", "chroot", "net_namespace", "pid_namespace", "scratch_tmpfs"}
    for name in ("seccomp", "rlimits", "session", "env_scrubbed", "scratch_dir"):
        assert v.layers[name] is True
    if PRIVILEGED:
        assert all(v.layers[n] for n in expected_root), v.layers
    off = pool_factory("all-off", only()).check("def f(x):\n    return x\n",
                                                "def check(candidate):\n    assert candidate(1) == 1\n", "f")
    assert not any(off.layers[n] for n in expected_root)

