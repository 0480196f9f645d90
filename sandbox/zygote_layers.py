"""The zygote's one-time setup: the isolation layers its children inherit or get per fork.

Set up once: an unprivileged user namespace (without root, where the kernel allows one),
a private network namespace, a private mount namespace for the children's scratch tmpfs
mounts, the probes for per-child pid and IPC namespaces, the worker's memory cgroup, the
choice of seccomp filter, a scrubbed environment, the import guard, job-independent
rlimits, no_new_privs, and a pristine, frozen heap. What is not available is recorded in
``layers`` and explained in ``notes``; ``verdict_notes`` go with every verdict.
"""
from __future__ import annotations

import gc
import os
import resource
import signal
import socket
import sys

from . import child_env, harness, namespaces, scratch
from .config import SandboxConfig
from .limits import apply_rlimits, shared_rlimits, vm_size_bytes

SAFE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "TMPDIR": "/", "PYTHONIOENCODING": "utf-8"}


class ZygoteLayers:
    """The zygote's state and its one-time setup (see zygote.Zygote for its loop)."""

    def __init__(self, sock: socket.socket, cfg: SandboxConfig, filters: dict | None, scratch_base: str,
                 cgroup_procs: str | None = None, cgroup_note: str | None = None):
        self.sock = sock
        self.cfg = cfg
        self.filters = filters          # {allow_ipc: CompiledFilter}, or None without seccomp
        self.filter = None
        self.base = scratch_base
        self.is_root = os.geteuid() == 0
        self.userns = False        # not root, but privileged inside a user namespace of our own
        self.clone_flags = 0       # user namespace mode: the namespaces each child is cloned into
        self.capdrop: namespaces.CapabilityDropper | None = None
        self.layers: dict[str, bool] = {}
        self.notes: list[str] = []
        self.verdict_notes: list[str] = []   # what every verdict of this worker should say
        self.children: dict[int, str] = {}
        self.jobs = 0
        self.pidns_fd: int | None = None
        self.ipc_fd: int | None = None     # root: our own IPC namespace, to return to after a fork
        self.cgroup_procs = cgroup_procs
        self.cgroup_note = cgroup_note
        self.cgroup_fd: int | None = None
        self.uid: int | None = None
        self.chroot = False
        self.scratch = scratch.Scratch(scratch_base, cfg.scratch_mb, cfg.scratch_inodes, None)
        self.fd_limit = 0
        self.base_vm = 0
        self.chan: child_env.Channel | None = None
        self.prepared = None
        self.broken: str | None = None     # a cleanup failed: refuse to start more children

    # -- one-time setup ------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        namespaces.set_pdeathsig(signal.SIGKILL)  # worker gone -> zygote gone -> children gone
        # Anything a child leaves behind (possible only if fork is: seccomp off and no pid
        # namespace) is re-parented to the zygote, which then finds, kills and reaps it.
        namespaces.set_child_subreaper()
        self.layers["user_namespace"] = False
        wants_ns = (cfg.net_namespace or cfg.scratch_tmpfs or cfg.pid_namespace or cfg.chroot
                    or cfg.drop_privileges or cfg.ipc_namespace)
        if not self.is_root and cfg.user_namespace and wants_ns:
            try:
                if namespaces.user_namespace_usable():
                    namespaces.enter_user_namespace()
                    self.userns = self.layers["user_namespace"] = True
                else:  # not allowed, or (e.g. AppArmor's restriction) without capabilities in it
                    self.notes.append("user_namespace: not available to this user (or no capabilities in it)")
            except OSError as e:
                self.notes.append(f"user_namespace: {e}")
        self.layers["net_namespace"] = self._try(cfg.net_namespace, "net_namespace",
                                                 lambda: namespaces.unshare(namespaces.CLONE_NEWNET))
        self.layers["scratch_tmpfs"] = self._try(cfg.scratch_tmpfs, "scratch_tmpfs", self._mount_scratch)
        self.layers["pid_namespace"] = self._try(cfg.pid_namespace, "pid_namespace", self._probe_pidns)
        self.layers["ipc_namespace"] = self._try(cfg.ipc_namespace, "ipc_namespace", self._probe_ipcns)
        self.layers["memory_cgroup"] = self._setup_cgroup()
        self.layers["drop_privileges"] = bool(cfg.drop_privileges and self.privileged)
        if cfg.drop_privileges and not self.privileged:
            self.notes.append("drop_privileges: neither root nor a user namespace; submission keeps the "
                              "worker's uid")
        self.chroot = self.layers["chroot"] = bool(cfg.chroot and self.privileged)
        if cfg.chroot and not self.privileged:
            self.notes.append("chroot: neither root nor a user namespace")
        self._choose_filter()
        self.layers["rlimits"] = True
        self.layers["session"] = True
        self.layers["env_scrubbed"] = True
        self.layers["scratch_dir"] = True
        if self.layers["drop_privileges"] and self.is_root:
            self.uid = self.scratch.owner = cfg.uid_base + os.getpid()
            os.setgroups([])
        elif self.layers["drop_privileges"]:
            self.capdrop = namespaces.CapabilityDropper()
        namespaces.limit_malloc_arenas(1)
        # Everything children share is prepared once, here, instead of per child:
        # scrubbed environment, fd-based std streams, the import guard (which also
        # hides the sandbox's own modules), the reply channel object, signal
        # dispositions, job-independent rlimits, no_new_privs, and a frozen GC so
        # that children do not touch (and copy) every inherited object when they collect.
        os.environ.clear()
        os.environ.update(SAFE_ENV)
        child_env.setup_streams()
        child_env.install_lazy_sources()
        child_env.install_import_guard()
        sys.argv[:] = ["submission"]
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-size writes fail with EFBIG instead
        self.chan = child_env.Channel()
        apply_rlimits(shared_rlimits(cfg, scoped_nproc=self.privileged))
        if not self.privileged:  # (an inference server in the same account has more threads than that)
            self.notes.append("max_threads: not enforced without root or a user namespace "
                              "(threads are bounded by the address-space limit)")
        self.fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if self.filter is not None:
            self.filter.set_no_new_privs()
        if self.cfg.warm_up:
            harness.warm_up()
        gc.collect()
        gc.freeze()
        self.base_vm = vm_size_bytes()
        self.prepared = harness.prepare(self.chan, self.filter is not None, self.base_vm)

    @property
    def privileged(self) -> bool:
        """Root, or the owner of a user namespace of its own (namespaces, mounts, chroot)."""
        return self.is_root or self.userns

    @property
    def own_pidns(self) -> bool:
        """Each child is pid 1 of a pid namespace of its own."""
        return self.pidns_fd is not None or bool(self.clone_flags & namespaces.CLONE_NEWPID)

    def _try(self, wanted: bool, name: str, fn) -> bool:
        if not wanted:
            return False
        if not self.privileged:
            self.notes.append(f"{name}: neither root nor a user namespace")
            return False
        try:
            fn()
            return True
        except OSError as e:
            self.notes.append(f"{name}: {e}")
            return False

    def _mount_scratch(self) -> None:
        namespaces.unshare(namespaces.CLONE_NEWNS)
        namespaces.make_mounts_private()
        self.scratch.mount()

    def _probe_clone(self, flag: int) -> None:
        """User namespace mode: children get new namespaces from clone(2) (the zygote cannot
        setns back to its own after an unshare there); probe that once."""
        pid = namespaces.clone_fork(self.clone_flags | flag)
        if pid == 0:
            os._exit(0 if flag != namespaces.CLONE_NEWPID or os.getpid() == 1 else 1)
        _, status = os.waitpid(pid, 0)
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            raise OSError(f"clone({flag:#x}) probe child ended with status {status}")
        self.clone_flags |= flag

    def _probe_per_child(self, flag: int, kind: str) -> int | None:
        """Probe making a new namespace of ``kind`` for each child. Root: unshare before each
        fork and setns back after (returns our own namespace's fd); user namespace: clone."""
        if self.userns:
            self._probe_clone(flag)
            return None
        fd = os.open(f"/proc/self/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC)
        try:
            namespaces.unshare(flag)
            namespaces.setns(fd, flag)
        except OSError:
            os.close(fd)
            raise
        return fd

    def _probe_pidns(self) -> None:
        self.pidns_fd = self._probe_per_child(namespaces.CLONE_NEWPID, "pid")

    def _probe_ipcns(self) -> None:
        self.ipc_fd = self._probe_per_child(namespaces.CLONE_NEWIPC, "ipc")

    def _setup_cgroup(self) -> bool:
        """Open the worker's memory group; probe moving a process into it."""
        if self.cgroup_procs is None:
            return False
        try:
            self.cgroup_fd = os.open(self.cgroup_procs, os.O_WRONLY | os.O_CLOEXEC)
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.read(r, 1)
                os._exit(0)
            try:
                os.write(self.cgroup_fd, b"%d" % pid)
            finally:
                os.close(w)
                os.close(r)
                os.waitpid(pid, 0)
            return True
        except OSError as e:
            self.cgroup_note = f"memory_cgroup: cannot move a process into {self.cgroup_procs}: {e}"
            if self.cgroup_fd is not None:
                os.close(self.cgroup_fd)
                self.cgroup_fd = None
            return False

    def _choose_filter(self) -> None:
        """SysV IPC stays allowed only where an IPC namespace of the child's own and a memory
        cgroup make it harmless (message queues and memfd are always denied: see
        seccomp_filter.DENY_COUNTERS); the notes say what else holds."""
        allow_ipc = self.layers["ipc_namespace"] and self.layers["memory_cgroup"]
        if self.filters:
            self.filter = self.filters.get(allow_ipc) or self.filters[False]
            allow_ipc = allow_ipc and self.filter is self.filters.get(True)
        self.layers["seccomp"] = self.filter is not None
        if self.cgroup_note:
            self.notes.append(self.cgroup_note)
        if not self.layers["memory_cgroup"]:
            denied = ("SysV IPC is denied (POSIX message queues and memfd_create always are)" if self.filter is not None
                      else "memory in SysV shared memory and memfd is not bounded (seccomp is off)")
            self.verdict_notes.append(f"memory: enforced by RLIMIT_AS only, no memory cgroup "
                                      f"({(self.cgroup_note or 'unavailable').removeprefix('memory_cgroup: ')}); "
                                      f"{denied}")

    def hello(self) -> dict:
        return {"zygote_pid": os.getpid(), "uid": self.uid, "layers": self.layers, "notes": self.notes,
                "verdict_notes": self.verdict_notes}

