"""The seccomp filter: built and compiled to BPF once per worker, installed in each child.

Default action is ALLOW with a deny list: a denied call fails with EPERM (so the
harness can report ``blocked``), except ``clone3``, which fails with ENOSYS so
that glibc falls back to ``clone`` for threads. Plain ``clone`` is allowed only
with CLONE_THREAD, i.e. threads yes, processes no. A syscall from a foreign
architecture ABI kills the whole process.
"""
from __future__ import annotations

import ctypes
import errno
import os
import tempfile

CLONE_THREAD = 0x00010000
CLONE_PIDFD = 0x00001000
PIPE_FDS = (1, 2, 3, 4)   # the child's stdout, stderr, requests and replies
F_DUPFD, F_DUPFD_CLOEXEC = 0, 1030
AF_UNIX = 1

# Calls that fail with EPERM. Unknown names on this architecture are skipped.
DENY_EPERM = (
    # network
    "socket",
    # process creation and program execution
    "fork", "vfork", "execve", "execveat",
    # debugging / reading or signalling other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "pidfd_open",
    "pidfd_send_signal",
    # mounts, namespaces, roots
    "mount", "umount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    # kernel attack surface
    "bpf", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
    "keyctl", "add_key", "request_key", "perf_event_open", "fanotify_init",
    "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "modify_ldt", "uselib",
    "mbind", "set_mempolicy", "migrate_pages", "move_pages",
    # machine administration
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff",
    "init_module", "finit_module", "delete_module", "acct", "quotactl", "quotactl_fd",
    "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "sethostname", "setdomainname", "vhangup", "iopl", "ioperm", "personality",
    # writing back every file system of the machine (a stall for everything else on it)
    "sync", "syncfs",
)
# Memory a child could hold outside RLIMIT_AS (SysV shared memory), and IPC objects that
# outlive it (SysV IPC): denied unless the child has an IPC namespace of its own and a memory
# cgroup bounds it (see build_bpf's allow_ipc).
DENY_IPC = (
    "shmget", "shmat", "shmdt", "shmctl", "msgget", "msgsnd", "msgrcv", "msgctl",
    "semget", "semop", "semtimedop", "semctl", "ipc",
)
# Objects whose inode numbers come from a counter that outlives the child (the kernel's
# machine-wide one for pipes, sockets and message queues, shmem's internal mount for memfd):
# a child that makes N of them moves the number the next child reads off its own pipes
# (fstat), an exact channel from one job to the next. Always denied; the child's own
# pipes (fds 1-4) are made by the worker. Threads, files, FIFOs on the scratch tmpfs (a
# fresh one per child) are unaffected.
DENY_COUNTERS = (
    "pipe", "pipe2", "socketpair",
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "memfd_create", "memfd_secret",
)
DENY_ENOSYS = ("clone3",)
# Signals: allowed only to pid/tgid 0 or 1 (the child's own process group, or the child
# itself, which is pid 1 of its own pid namespace); any other target, -1 included, fails
# with EPERM. Without a pid namespace this keeps a submission from signalling the user's
# other processes, which it otherwise could (same uid).
SIGNAL_TARGET_FIRST_ARG = ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")


class SeccompUnavailable(RuntimeError):
    pass


def build_bpf(allow_ipc: bool = False) -> bytes:
    """Build the filter with libseccomp (via pyseccomp) and export it as raw BPF.

    ``allow_ipc``: leave the DENY_IPC calls allowed (only for children that get an IPC
    namespace of their own and a memory cgroup)."""
    try:
        import pyseccomp as sc
    except Exception as e:  # ImportError, or RuntimeError when libseccomp is missing
        raise SeccompUnavailable(f"pyseccomp/libseccomp not usable: {e}") from e

    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    try:
        # Binary-tree layout: a shorter path per syscall, and the kernel attaches it
        # (per child) noticeably faster than the default linear list.
        f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
    except OSError:
        pass
    native = sc.Arch.NATIVE

    def nr(name: str) -> int | None:
        n = sc.resolve_syscall(native, name)
        return n if isinstance(n, int) and n >= 0 else None

    for name in DENY_EPERM + DENY_COUNTERS + (() if allow_ipc else DENY_IPC):
        n = nr(name)
        if n is not None:
            f.add_rule(sc.ERRNO(errno.EPERM), n)
    for name in DENY_ENOSYS:
        n = nr(name)
        if n is not None:
            f.add_rule(sc.ERRNO(errno.ENOSYS), n)
    # clone(flags, ...) without CLONE_THREAD creates a process: deny. (x86-64 and
    # aarch64 pass the flags as the first argument.)
    n = nr("clone")
    if n is not None:
        f.add_rule(sc.ERRNO(errno.EPERM), n, sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))

    n = nr("clone")
    if n is not None:   # a pidfd of a thread: its number comes from a machine-wide counter
        f.add_rule(sc.ERRNO(errno.EPERM), n, sc.Arg(0, sc.MASKED_EQ, CLONE_PIDFD, CLONE_PIDFD))
    # The child's own pipes (fds 1-4) were made by the worker: their inode numbers and times
    # say how many pipes the worker made before and when (a rerun's extra child, the end of
    # the previous job). Not readable: no fstat/statx of them, nor of a copy of them.
    for name in ("fstat", "newfstatat", "statx", "dup", "dup2", "dup3"):
        n = nr(name)
        for fd in PIPE_FDS if n is not None else ():
            f.add_rule(sc.ERRNO(errno.EPERM), n, sc.Arg(0, sc.EQ, fd))
    n = nr("fcntl")
    for fd in PIPE_FDS if n is not None else ():
        for cmd in (F_DUPFD, F_DUPFD_CLOEXEC):
            f.add_rule(sc.ERRNO(errno.EPERM), n, sc.Arg(0, sc.EQ, fd), sc.Arg(1, sc.EQ, cmd))

    for name in SIGNAL_TARGET_FIRST_ARG:
        n = nr(name)
        if n is not None:
            # unsigned comparison: negative targets (-1, -pgid) are huge, so denied too
            f.add_rule(sc.ERRNO(errno.EPERM), n, sc.Arg(0, sc.GT, 1))

    with tempfile.TemporaryFile() as tmp:
        f.export_bpf(tmp)
        tmp.seek(0)
        bpf = tmp.read()
    if not bpf or len(bpf) % 8:
        raise SeccompUnavailable("libseccomp exported an empty or malformed BPF program")
    return bpf


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class CompiledFilter:
    """A BPF program held in memory, ready to install after fork (no libseccomp call per child)."""

    def __init__(self, bpf: bytes):
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buf, ctypes.c_void_p))
        self._prog_addr = ctypes.addressof(self._prog)
        # PyDLL: installing runs in every child, so no GIL release/re-take and no errno
        # bookkeeping on success (errno is read only after a failure).
        self._libc = ctypes.PyDLL(None)
        self._prctl = self._libc.prctl
        self._prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        self._prctl.restype = ctypes.c_int
        self._errno = getattr(self._libc, "__errno_location")  # (no name mangling)
        self._errno.argtypes = []
        self._errno.restype = ctypes.POINTER(ctypes.c_int)

    def _fail(self, what: str) -> OSError:
        e = self._errno()[0]
        return OSError(e, f"{what}: {os.strerror(e)}")

    def set_no_new_privs(self) -> None:
        """Required before an unprivileged process may load a filter; inherited across fork."""
        if self._prctl(PR_SET_NO_NEW_PRIVS, 1, None, 0, 0) != 0:
            raise self._fail("prctl(PR_SET_NO_NEW_PRIVS)")

    def install(self) -> None:
        """Load the filter into the calling (single-threaded) process; no_new_privs must be set."""
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._prog_addr, 0, 0) != 0:
            raise self._fail("prctl(PR_SET_SECCOMP)")
