"""Helpers shared by the sandbox tests (imported as a top-level module, like runners_testlib)."""
from __future__ import annotations

import os

import pytest

from sandbox import SandboxConfig, SandboxPool

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="this isolation layer needs root (CI runs as root)")

ALL_OFF = dict(seccomp=False, drop_privileges=False, chroot=False, net_namespace=False,
               pid_namespace=False, scratch_tmpfs=False)


def only(**on) -> SandboxConfig:
    """A config with every layer off except the named ones."""
    return SandboxConfig(**{**ALL_OFF, **on})


def sandbox_processes(uid_base: int) -> list[tuple[int, str]]:
    """(pid, name) of every process on the machine running as a sandbox uid."""
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
        uids = [int(x) for x in fields.get("Uid", "").split()]
        if uids and any(u >= uid_base for u in uids) and "Z" not in fields.get("State", ""):
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
    path = f"/proc/{info['zygote_pid']}/root{base}" if IS_ROOT else base
    return os.listdir(path)


def assert_nothing_left(p: SandboxPool) -> None:
    infos = p.worker_info()
    assert infos, "pool has no live workers"
    procs = sandbox_processes(p.config.uid_base)
    assert procs == [], f"processes still running as a sandbox uid: {procs}"
    for info in infos:
        assert zygote_children(info["zygote_pid"]) == [], "the zygote still has children"
        assert scratch_entries(info) == [], "a scratch directory was left behind"
