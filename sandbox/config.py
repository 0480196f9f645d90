"""Sandbox configuration: which isolation layers to use and the fixed caps.

Every layer is on by default. Switching one off is meant for tests that
examine a single layer on its own, and for machines where a layer is not
available (the sandbox also falls back by itself and records what was active).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class SandboxConfig:
    # --- isolation layers -------------------------------------------------
    seccomp: bool = True            # syscall filter (network, process creation, exec, ...)
    drop_privileges: bool = True    # run the submission as an unprivileged uid (root only)
    chroot: bool = True             # the submission's whole filesystem view is its scratch dir (root only)
    net_namespace: bool = True      # private network namespace with no interfaces but lo
    pid_namespace: bool = True      # submission is pid 1 of its own pid namespace: all it started dies with it
    scratch_tmpfs: bool = True      # scratch dirs live on a size-limited tmpfs in a private mount namespace,
                                    # a fresh one per child (never walked; constant inode numbers)
    ipc_namespace: bool = True      # each child gets an IPC namespace of its own (SysV IPC, POSIX message
                                    # queues): nothing it creates there outlives it or reaches another job
    memory_cgroup: bool = True      # enforce memory_mb with a cgroup v2 group per worker (memory.max covers
                                    # shared memory, memfd and tmpfs too) where one can be made; otherwise
                                    # RLIMIT_AS only, with SysV IPC denied (message queues, memfd: always)
    cgroup_parent: str | None = None   # a delegated cgroup v2 directory to make the groups in (default: this
                                       # process's own cgroup, usable only if memory is in its subtree_control)
    user_namespace: bool = True     # without root: set up the root-only layers above inside an unprivileged
                                    # user namespace (where the kernel allows it); children drop all capabilities
    # --- speed -----------------------------------------------------------
    prestart_child: bool = True     # keep one child started ahead while the worker waits (forked in the
                                    # same zygote round trip that reaps the previous job's child)
    pin_workers: bool = True        # run each worker with its zygote and children on one CPU (round robin
                                    # over the allowed CPUs): no cross-CPU hand-offs within a job
    warm_up: bool = True            # run a fixed stand-in job through the child's code paths in the zygote
                                    # before forking (fewer copy-on-write faults per child)
    # --- caps ------------------------------------------------------------
    uid_base: int = 1_500_000_000   # submission uid = uid_base + zygote pid (one unused uid per worker)
    output_cap_bytes: int = 64 * 1024   # per stream (stdout, stderr)
    max_file_mb: int = 16           # RLIMIT_FSIZE
    max_open_files: int = 64        # RLIMIT_NOFILE
    max_threads: int = 64           # RLIMIT_NPROC (counts threads; effective once the uid is dropped, or
                                    # inside a user namespace, where it counts only the namespace's processes)
    scratch_mb: int = 64            # tmpfs size per worker
    scratch_inodes: int = 4096      # files and directories on that tmpfs
    max_message_bytes: int = 32 * 1024 * 1024   # most bytes a job's replies may hold, all together
    max_reply_values: int = 1_000_000           # most JSON values a job's replies may hold, all together
    preload_extra: tuple[str, ...] = ()          # extra modules to pre-import in the warm worker

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["preload_extra"] = list(self.preload_extra)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SandboxConfig":
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        if "preload_extra" in kw:
            kw["preload_extra"] = tuple(kw["preload_extra"])
        return cls(**kw)


@dataclass(frozen=True)
class JobLimits:
    """The caps a caller chooses per job: the defaults of every check and run. (The sandbox keeps
    its own: it imports nothing of CAPA, which takes these as its defaults.)"""

    timeout_s: float = 10.0         # wall-clock seconds for one job (RLIMIT_CPU is a backstop behind it)
    memory_mb: int = 1024           # MiB the submission itself may allocate (above the interpreter's own size)


JOB_LIMITS = JobLimits()            # the sandbox's defaults: pool.check/run, CheckJob, Limits, the CLI
