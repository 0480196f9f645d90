"""Thin ctypes wrappers for the Linux namespace, mount and capability calls the zygote uses."""
from __future__ import annotations

import ctypes
import errno
import os
import platform

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
SIGCHLD = 17
# clone(2)'s number; its first argument (the flags) is the same on both.
SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
M_ARENA_MAX = -8

_libc = ctypes.CDLL(None, use_errno=True)
_libc.unshare.argtypes = [ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
# The calls made for every child (fork, and setns/unshare for its pid namespace) go through
# PyDLL: the GIL stays held (nothing to release and re-take, in the child least of all) and no
# errno bookkeeping runs on success; errno is read only when a call failed.
_pylibc = ctypes.PyDLL(None)
_fork = _pylibc.fork
_fork.argtypes = []
_fork.restype = ctypes.c_int
_setns = _pylibc.setns
_setns.argtypes = [ctypes.c_int, ctypes.c_int]
_setns.restype = ctypes.c_int
_unshare = _pylibc.unshare
_unshare.argtypes = [ctypes.c_int]
_unshare.restype = ctypes.c_int
_prctl = _pylibc.prctl
_prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_prctl.restype = ctypes.c_int
_syscall = _pylibc.syscall
_syscall.argtypes = [ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_syscall.restype = ctypes.c_long
_errno_location = _pylibc.__errno_location
_errno_location.argtypes = []
_errno_location.restype = ctypes.POINTER(ctypes.c_int)


def _fail(what: str) -> OSError:
    e = _errno_location()[0]
    return OSError(e, f"{what}: {os.strerror(e)}")


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def unshare(flags: int) -> None:
    if _unshare(flags):
        raise _fail(f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    if _setns(fd, nstype):
        raise _fail("setns")


def make_mounts_private() -> None:
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def mount_tmpfs(path: str, size_mb: int, nr_inodes: int = 4096, mode: str = "0711",
                owner: int | None = None) -> None:
    opts = f"size={size_mb}m,nr_inodes={nr_inodes},mode={mode}"
    if owner is not None:
        opts += f",uid={owner},gid={owner}"
    _check(_libc.mount(b"capa-sandbox", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts.encode()),
           f"mount tmpfs on {path}")


def umount(path: str) -> bool:
    """Unmount ``path`` now; False if it is busy (or not a mount point)."""
    return _libc.umount2(path.encode(), 0) == 0


def umount_detached(path: str) -> bool:
    """Lazily unmount ``path`` (and what is mounted below it); False if nothing was mounted there."""
    if _libc.umount2(path.encode(), MNT_DETACH) == 0:
        return True
    e = ctypes.get_errno()
    if e == errno.EINVAL:   # not a mount point
        return False
    raise OSError(e, f"umount {path}: {os.strerror(e)}")


def set_pdeathsig(sig: int) -> None:
    if _prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0):   # in every child: the PyDLL route
        raise _fail("prctl(PR_SET_PDEATHSIG)")


def set_child_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of init."""
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")


def set_dumpable(flag: bool) -> None:
    _check(_libc.prctl(PR_SET_DUMPABLE, 1 if flag else 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")


def limit_malloc_arenas(n: int = 1) -> None:
    """Keep glibc from reserving a 64 MiB arena per thread (matters under RLIMIT_AS)."""
    _libc.mallopt(M_ARENA_MAX, n)


def raw_fork() -> int:
    """fork(2) without CPython's after-fork hooks.

    Only for a single-threaded caller (the zygote). CPython's own child-side
    bookkeeping (re-creating thread locks, re-seeding ``random``, running
    ``os.register_at_fork`` callbacks) costs about half a millisecond per child,
    mostly copy-on-write faults; in a single-threaded process none of it is
    needed except the reseed, which the zygote does just before each fork.
    """
    pid = _fork()
    if pid < 0:
        raise _fail("fork")
    return pid


def clone_fork(flags: int = CLONE_NEWPID) -> int:
    """fork(2) whose child starts in fresh namespaces: clone(flags | SIGCHLD), e.g. with
    CLONE_NEWPID the child is pid 1 of a pid namespace of its own.

    Used inside an unprivileged user namespace, where the zygote cannot point its
    pid_for_children (or its IPC namespace) back at its own namespace after an unshare
    (that needs CAP_SYS_ADMIN over the initial user namespace); clone creates the child's
    namespaces without changing the caller's. Like raw_fork it skips CPython's after-fork hooks.
    The raw system call also skips glibc's fork bookkeeping, so the child's cached
    thread id is stale: only ``signal.pthread_kill`` on the main thread and
    ``raise(3)`` notice (they fail with ESRCH). The rest of glibc and CPython does not
    use the cached id.
    """
    if SYS_CLONE is None:
        raise OSError(f"clone with new namespaces: unsupported machine {platform.machine()!r}")
    pid = _syscall(SYS_CLONE, flags | SIGCHLD, 0, 0, 0, 0)
    if pid < 0:
        raise _fail(f"clone({flags:#x})")
    return pid


def _write_proc(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_user_namespace() -> None:
    """Move the calling (single-threaded, unprivileged) process into a new user namespace.

    The process keeps its uid and gid (each mapped to itself; supplementary groups are
    dropped and setgroups is denied) and gains, inside the namespace only, the
    capabilities to create network, mount and pid namespaces, mount a tmpfs and chroot.
    Processes it creates are counted for RLIMIT_NPROC within the namespace.
    """
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    _write_proc("/proc/self/setgroups", "deny")
    _write_proc("/proc/self/uid_map", f"{uid} {uid} 1")
    _write_proc("/proc/self/gid_map", f"{gid} {gid} 1")


CAP_SYS_CHROOT = 18
CAP_SYS_ADMIN = 21


def has_namespace_capabilities() -> bool:
    """Whether this process holds CAP_SYS_ADMIN and CAP_SYS_CHROOT (in its user namespace)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                eff = int(line.split()[1], 16)
                return bool(eff >> CAP_SYS_ADMIN & 1) and bool(eff >> CAP_SYS_CHROOT & 1)
    return False


def user_namespace_usable() -> bool:
    """Probe, in a throwaway child, whether this process could enter a user namespace and
    hold namespace capabilities there (a half-made one, say with the uid map refused,
    would leave the caller with an unmapped uid)."""
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            enter_user_namespace()
            ok = has_namespace_capabilities()
        except BaseException:
            pass
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class CapabilityDropper:
    """Clears every capability of the calling process (capset with empty sets).

    Built once in the zygote; ``drop()`` runs in each child. In a user namespace the
    child keeps the user's own uid, so this (with no_new_privs, which keeps an exec from
    granting any back) is what makes it unprivileged there.
    """

    def __init__(self):
        self._header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        self._data = (_CapData * 2)()
        self._capset = _pylibc.capset
        self._capset.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._capset.restype = ctypes.c_int
        self._args = (ctypes.addressof(self._header), ctypes.addressof(self._data))

    def drop(self) -> None:
        if self._capset(*self._args):
            raise _fail("capset")
