"""Helpers shared by the sandbox tests (imported as a top-level module, like runners_testlib)."""
from __future__ import annotations

import os

import pytest

from sandbox import SandboxConfig, SandboxPool

IS_ROOT = os.geteuid() == 0


def _user_namespaces_usable() -> bool:
    from sandbox.namespaces import user_namespace_usable
    try:
        return user_namespace_usable()
    except OSError:
        return False


# Root, or (without root) unprivileged user namespaces: every layer is available either way.
PRIVILEGED = IS_ROOT or _user_namespaces_usable()
needs_privilege = pytest.mark.skipif(
    not PRIVILEGED, reason="this isolation layer needs root or unprivileged user namespaces (CI runs as root)")

ALL_OFF = dict(seccomp=False, drop_privileges=False, chroot=False, net_namespace=False,
               pid_namespace=False, scratch_tmpfs=False, ipc_namespace=False,
               memory_cgroup=False)   # (user_namespace stays on: it is a means, not a layer)


# Module-level code for a submission that reaches ctypes the way a hostile one can: the
# child's stack still holds the zygote's frames, whose globals hold the sandbox's ctypes
# wrappers. From there any system call the seccomp filter allows is one call away.
CTYPES = '''
import sys
def _find_ctypes():
    f = sys._getframe()
    while f is not None:
        for v in list(f.f_globals.values()):
            if isinstance(v, type(sys)):
                m = v if v.__name__ == "ctypes" else getattr(v, "ctypes", None)
                if isinstance(m, type(sys)) and hasattr(m, "CDLL"):
                    return m
        f = f.f_back
    raise RuntimeError("no ctypes on the stack")
ct = _find_ctypes()
libc = ct.CDLL(None, use_errno=True)
libc.shmat.restype = ct.c_void_p
libc.shmat.argtypes = [ct.c_int, ct.c_void_p, ct.c_int]
'''


def only(**on) -> SandboxConfig:
    """A config with every layer off except the named ones."""
    return SandboxConfig(**{**ALL_OFF, **on})


def sandbox_processes(uids) -> list[tuple[int, str]]:
    """(pid, name) of every process on the machine running as one of `uids`."""
    uids = set(uids)
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        ids = [int(x) for x in fields.get("Uid", "").split()]
        if ids and uids & set(ids) and "Z" not in fields.get("State", ""):
            out.append((int(entry), fields.get("Name", "").strip()))
    return out


def zygote_children(zygote_pid: int) -> list[int]:
    kids = []
    try:
        for tid in os.listdir(f"/proc/{zygote_pid}/task"):
            with open(f"/proc/{zygote_pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def scratch_entries(info: dict) -> list[str]:
    """What is left in a worker's scratch base, seen from inside the zygote's mount namespace."""
    base = info["scratch_base"]
    path = f"/proc/{info['zygote_pid']}/root{base}" if PRIVILEGED else base
    return os.listdir(path)


def assert_nothing_left(p: SandboxPool) -> None:
    """Nothing a submission started survives its verdict, and its scratch dir is gone.

    Each worker keeps one spare child, started ahead for the next job: it is allowed (it
    has run no submission code yet), but nothing else is.
    """
    infos = p.worker_info(live=True)
    assert infos, "pool has no live workers"
    spares = {i["spare_pid"] for i in infos if i.get("spare_pid")}
    uids = {i["uid"] for i in infos if i.get("uid") is not None}   # one sandbox uid per worker
    procs = [(pid, name) for pid, name in sandbox_processes(uids) if pid not in spares]
    assert procs == [], f"processes still running as a sandbox uid: {procs}"
    for info in infos:
        assert set(zygote_children(info["zygote_pid"])) <= {info.get("spare_pid")}, "the zygote still has children"
        left = [e for e in scratch_entries(info) if e != info.get("spare_scratch")]
        assert left == [], f"a scratch directory was left behind: {left}"
        if info.get("spare_scratch") and PRIVILEGED:
            spare_dir = f"/proc/{info['zygote_pid']}/root{info['scratch_base']}/{info['spare_scratch']}"
            assert os.listdir(spare_dir) == [], "the spare child's scratch dir is not empty"
