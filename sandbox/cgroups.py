"""A cgroup v2 memory group per worker: ``memory.max`` bounds all that a child holds.

RLIMIT_AS bounds a child's address space only: shared memory it detaches, memfd and tmpfs
files it keeps no mapping of, and kernel memory (pipes, SysV message queues) escape it. A
cgroup's ``memory.max`` charges all of these. The worker makes one group for its children
(the zygote moves each child in right after forking it) and sets ``memory.max`` to the
job's ``memory_mb`` before the job starts; a child that reaches it is killed by the
group's OOM killer, which ``oom_kills`` counts.

cgroup v2 lets a group have sub-groups with controllers only where no process sits in it
(the root excepted), so the group is made under ``SandboxConfig.cgroup_parent`` (a
delegated cgroup, e.g. one made by systemd with ``Delegate=yes``), or else under this
process's own cgroup when that already lets sub-groups use the memory controller.
Where neither works, ``open_group`` says why and the sandbox falls back to RLIMIT_AS.
"""
from __future__ import annotations

import os
import time

MiB = 1024 * 1024
SLACK_MB = 16   # the child's own share of the interpreter (copy-on-write copies, page tables)


def _cgroup2_mount(mountinfo: str) -> tuple[str, str] | None:
    """(mount point, root of the mount within the hierarchy) of the first cgroup2 mount."""
    for line in mountinfo.splitlines():
        left, _, right = line.partition(" - ")
        fields = left.split()
        if right.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            return fields[4], fields[3]
    return None


def own_cgroup_dir(proc_cgroup: str, mountinfo: str) -> str | None:
    """The directory of this process's cgroup v2, from /proc/self/cgroup and mountinfo."""
    path = next((line[3:] for line in proc_cgroup.splitlines() if line.startswith("0::")), None)
    mount = _cgroup2_mount(mountinfo)
    if path is None or mount is None:
        return None
    point, root = mount
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root):] or "/"
    return os.path.normpath(point + "/" + path.lstrip("/"))


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


class MemoryGroup:
    """One worker's group: its children's memory, limited per job."""

    def __init__(self, path: str):
        self.path = path
        self.procs = os.path.join(path, "cgroup.procs")
        self.limit: int | None = None
        self._events = os.open(os.path.join(path, "memory.events"), os.O_RDONLY | os.O_CLOEXEC)

    @classmethod
    def create(cls, parent: str, name: str) -> "MemoryGroup":
        path = os.path.join(parent, name)
        os.mkdir(path)
        try:
            for knob, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if os.path.exists(os.path.join(path, knob)):   # (no swap accounting / an older kernel)
                    _write(os.path.join(path, knob), value)
            return cls(path)
        except BaseException:
            os.rmdir(path)
            raise

    def set_limit(self, memory_mb: int) -> None:
        """``memory.max`` for the next job (written only when it changes)."""
        value = (memory_mb + SLACK_MB) * MiB
        if value != self.limit:
            _write(os.path.join(self.path, "memory.max"), str(value))
            self.limit = value

    def oom_kills(self) -> int:
        return parse_oom_kills(os.pread(self._events, 4096, 0).decode())

    def remove(self) -> None:
        """Remove the group (once its processes are gone; their exit may still be under way)."""
        try:
            os.close(self._events)
        except OSError:
            pass
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def parse_oom_kills(events: str) -> int:
    for line in events.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0


def open_group(enabled: bool, parent: str | None, name: str) -> tuple[MemoryGroup | None, str | None]:
    """(the worker's group, None), or (None, why there is none)."""
    if not enabled:
        return None, "memory_cgroup: switched off"
    explicit = parent is not None
    if parent is None:
        try:
            parent = own_cgroup_dir(_read("/proc/self/cgroup"), _read("/proc/self/mountinfo"))
        except OSError as e:
            return None, f"memory_cgroup: cannot read this process's cgroup: {e}"
        if parent is None:
            return None, "memory_cgroup: no cgroup v2 hierarchy is mounted"
    try:
        enabled_below = _read(os.path.join(parent, "cgroup.subtree_control")).split()
    except OSError as e:
        return None, f"memory_cgroup: {parent} is not a usable cgroup v2 directory ({e})"
    if "memory" not in enabled_below:
        if not explicit:
            return None, (f"memory_cgroup: the memory controller is not enabled for sub-groups of {parent} "
                          f"(set SandboxConfig.cgroup_parent to a delegated cgroup)")
        try:
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")
        except OSError as e:
            return None, f"memory_cgroup: cannot enable the memory controller below {parent}: {e}"
    try:
        return MemoryGroup.create(parent, name), None
    except OSError as e:
        return None, f"memory_cgroup: cannot create a group under {parent}: {e}"
