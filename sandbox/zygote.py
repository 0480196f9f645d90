"""The zygote: a pristine, trusted process that forks one sandboxed child per execution.

The worker forks the zygote right after pre-importing modules and compiling
the seccomp filter, before it handles any job, so a child forked from the
zygote never holds a test (or an earlier job's data) in its memory.

Layers set up once here and inherited by every child: private network
namespace; private mount namespace with a size-limited tmpfs for scratch dirs;
scrubbed environment; import guard; job-independent rlimits (file size, open
files, threads, core dumps); no_new_privs; no supplementary groups.
Per child: a fresh pid namespace (the child is its pid 1, so everything it
starts dies with it), a new session, a chroot into its own scratch directory,
the address-space and CPU rlimits of the job, an unprivileged uid, and the
seccomp filter (compiled once by the worker, only loaded here).

Without root, the zygote first enters an unprivileged user namespace (where the
kernel allows one) and sets up the same layers inside it; children then keep the
user's uid but lose every capability, and each still gets its own pid namespace.

Zygote <-> worker: fixed-size struct messages over a SOCK_SEQPACKET socketpair
(JSON only for the one-time hello). The worker creates each child's pipes and
passes the child's ends along with the spawn request (SCM_RIGHTS); they arrive
on fds 1-4, where the child needs them, so the child only closes the rest.
"""
from __future__ import annotations

import gc
import json
import os
import random
import resource
import shutil
import signal
import socket
import struct
import sys

from . import harness, namespaces
from .config import SandboxConfig
from .harness import SETUP_FAILED_CODE as SETUP_FAILED
from .limits import apply_rlimits, shared_rlimits, vm_size_bytes
from .protocol import encode_frame, write_frame

SAFE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "TMPDIR": "/", "PYTHONIOENCODING": "utf-8"}
MSG_MAX = 1 << 16
# The zygote's fd layout: 0 = /dev/null (every child's stdin), 1-4 = free between spawns (a
# spawn request's four pipe ends land there: the child's stdout, stderr, requests, replies),
# 5 = the socket to the worker, >= 6 = the zygote's own. A child closes everything from 5 up.
SOCK_FD = 5
CHILD_FDS = [1, 2, 3, 4]
_READY = encode_frame({"ready": True})


# Per-job messages are fixed-size structs (the zygote's own work between forks is kept
# tiny: every page it touches while a child is alive costs a copy-on-write fault).
SPAWN = struct.Struct("<ci")      # b"s", pid to reap first (0: none)   + 4 fds: out_w, err_w, req_r, rep_w
SPAWNED = struct.Struct("<cii")   # b"p", pid, job number (scratch dir j<N>)
REAP = struct.Struct("<ci")       # b"r", pid
REAPED = struct.Struct("<cidqq")  # b"R", wait status, cpu seconds, maxrss KiB, minor faults
# errors: b"e" + utf-8 text


def send_msg(sock: socket.socket, obj, fds=()) -> None:
    data = json.dumps(obj).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv_msg(sock: socket.socket, maxfds: int = 0):
    if maxfds:
        data, fds, _flags, _addr = socket.recv_fds(sock, MSG_MAX, maxfds)
    else:
        data, fds = sock.recv(MSG_MAX), []
    if not data:
        return None, fds
    return json.loads(data), fds


class Zygote:
    def __init__(self, sock: socket.socket, cfg: SandboxConfig, seccomp_filter, scratch_base: str):
        self.sock = sock
        self.cfg = cfg
        self.filter = seccomp_filter
        self.base = scratch_base
        self.is_root = os.geteuid() == 0
        self.userns = False        # not root, but privileged inside a user namespace of our own
        self.pidns_by_clone = False  # per-child pid namespaces made by clone (user namespace mode)
        self.capdrop: namespaces.CapabilityDropper | None = None
        self.layers: dict[str, bool] = {}
        self.notes: list[str] = []
        self.children: dict[int, str] = {}
        self.jobs = 0
        self.pidns_fd: int | None = None
        self.uid: int | None = None
        self.chroot = False
        self.fd_limit = 0
        self.base_vm = 0
        self.chan: harness.Channel | None = None
        self.prepared = None

    # -- one-time setup ------------------------------------------------------
    def setup(self) -> None:
        cfg = self.cfg
        namespaces.set_pdeathsig(signal.SIGKILL)  # worker gone -> zygote gone -> children gone
        # Anything a child leaves behind (possible only if fork is: seccomp off and no pid
        # namespace) is re-parented to the zygote, which then finds, kills and reaps it.
        namespaces.set_child_subreaper()
        self.layers["user_namespace"] = False
        wants_ns = (cfg.net_namespace or cfg.scratch_tmpfs or cfg.pid_namespace or cfg.chroot
                    or cfg.drop_privileges)
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
        self.layers["drop_privileges"] = bool(cfg.drop_privileges and self.privileged)
        if cfg.drop_privileges and not self.privileged:
            self.notes.append("drop_privileges: neither root nor a user namespace; submission keeps the "
                              "worker's uid")
        self.chroot = self.layers["chroot"] = bool(cfg.chroot and self.privileged)
        if cfg.chroot and not self.privileged:
            self.notes.append("chroot: neither root nor a user namespace")
        self.layers["seccomp"] = self.filter is not None
        self.layers["rlimits"] = True
        self.layers["session"] = True
        self.layers["env_scrubbed"] = True
        self.layers["scratch_dir"] = True
        if self.layers["drop_privileges"] and self.is_root:
            self.uid = cfg.uid_base + os.getpid()
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
        harness.setup_streams()
        harness.install_lazy_sources()
        harness.install_import_guard()
        sys.argv[:] = ["submission"]
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-size writes fail with EFBIG instead
        self.chan = harness.Channel()
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
        return self.pidns_fd is not None or self.pidns_by_clone

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
        namespaces.mount_tmpfs(self.base, self.cfg.scratch_mb)

    def _probe_pidns(self) -> None:
        if self.userns:
            # Inside a user namespace the zygote cannot setns back to its own pid namespace,
            # so children are made with clone(CLONE_NEWPID) instead: probe that once.
            pid = namespaces.fork_into_new_pidns()
            if pid == 0:
                os._exit(0 if os.getpid() == 1 else 1)
            _, status = os.waitpid(pid, 0)
            if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                raise OSError(f"clone(CLONE_NEWPID) probe child ended with status {status}")
            self.pidns_by_clone = True
            return
        fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        try:
            namespaces.unshare(namespaces.CLONE_NEWPID)
            namespaces.setns(fd, namespaces.CLONE_NEWPID)
        except OSError:
            os.close(fd)
            raise
        self.pidns_fd = fd

    def hello(self) -> dict:
        return {"zygote_pid": os.getpid(), "uid": self.uid, "layers": self.layers, "notes": self.notes}

    # -- loop ---------------------------------------------------------------
    def serve(self) -> None:
        # Everything between a fork and the next blocking recvmsg runs while the new child
        # shares the zygote's memory, so each page written there costs a copy-on-write fault:
        # that stretch is kept to a send and a close (no Python-level socket helpers).
        sock = self.sock
        recvmsg = sock.recvmsg
        send = sock.send
        anc_size = socket.CMSG_LEN(4 * 4)
        while True:
            try:
                msg, anc, _flags, _addr = recvmsg(64, anc_size)
            except OSError:
                msg, anc = b"", []
            fds = _received_fds(anc)
            if not msg:
                self._shutdown()
                os._exit(0)
            try:
                if msg[:1] == b"s":
                    old = SPAWN.unpack(msg)[1]
                    if old:  # the previous child, killed by the worker before its verdict
                        try:
                            self._reap(old, report=False)
                        except Exception:
                            pass
                    reply = self._spawn(fds)
                    fds = None
                    send(reply)
                elif msg[:1] == b"r":
                    send(self._reap(REAP.unpack(msg)[1]))
                else:
                    send(b"eunknown request")
            except Exception as e:
                send(b"e" + f"{type(e).__name__}: {e}".encode()[:1000])
            finally:
                if fds:
                    os.closerange(1, 5)
                    for fd in fds:
                        if fd > 4:
                            os.close(fd)

    def _shutdown(self) -> None:
        for pid in list(self.children):
            try:
                self._reap(pid)
            except Exception:
                pass

    def _spawn(self, fds: list[int]) -> bytes:
        """Start a child on the pipe ends just received (fds 1-4). Its per-job limits (memory,
        CPU) are set by the child itself when the job arrives, so a worker can keep one child
        ready before it knows the next job."""
        if len(fds) != 4:
            raise ValueError(f"spawn needs 4 fds, got {len(fds)}")
        if fds != CHILD_FDS:
            _place(fds)
        self.jobs += 1
        jobno = self.jobs
        scratch = f"{self.base}/j{jobno}"
        os.mkdir(scratch, 0o700)
        try:
            if self.uid is not None:
                os.chown(scratch, self.uid, self.uid)
            # raw_fork skips CPython's after-fork reseed: seed here, before the fork, so each
            # child starts from its own fresh stream without writing the state itself.
            # (random.seed() with no argument, minus the Python-level wrapper: a full state
            # from os.urandom.)
            _reseed(_random_inst)
            _random_inst.gauss_next = None
            if self.pidns_fd is not None:
                # A fresh pid namespace for this child only. (pid_for_children is pointed back
                # at our own namespace first -- it still names the previous child's -- so that
                # nothing of this runs after the fork.)
                namespaces.setns(self.pidns_fd, namespaces.CLONE_NEWPID)
                namespaces.unshare(namespaces.CLONE_NEWPID)
                pid = namespaces.raw_fork()
            elif self.pidns_by_clone:
                pid = namespaces.fork_into_new_pidns()
            else:
                pid = namespaces.raw_fork()
            if pid == 0:
                try:
                    self._child(scratch)
                finally:
                    os._exit(SETUP_FAILED)
        except BaseException:
            os.closerange(1, 5)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        os.closerange(1, 5)  # the child's ends stay with the child only
        self.children[pid] = scratch
        return SPAWNED.pack(b"p", pid, jobno)

    def _reap(self, pid: int, report: bool = True) -> bytes:
        """Kill (if the worker has not yet), wait for and clean up after a child. ``report``:
        return its wait status and resource use (REAPED), else nothing."""
        scratch = self.children.pop(pid, None)
        if scratch is None:
            return b"eunknown child"
        try:
            os.kill(pid, signal.SIGKILL)  # with a pid namespace (pid 1 there) the kernel kills the rest
            if not self.own_pidns:
                os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if report:
            _, status, ru = os.wait4(pid, 0)
        else:
            os.waitpid(pid, 0)
        if not self.own_pidns and self.filter is None:
            self._sweep()  # fork was possible: kill whatever the child left running
        try:
            os.rmdir(scratch)
        except OSError:
            shutil.rmtree(scratch, ignore_errors=True)
            if os.path.exists(scratch):
                _force_rmtree(scratch)
        if not report:
            return b""
        return REAPED.pack(b"R", status, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, ru.ru_minflt)

    def _sweep(self) -> None:
        """Kill and reap every descendant left over from a finished child.

        Orphans are re-parented to the zygote (it is a child subreaper), so its children
        other than live jobs are exactly the leftovers. With a sandbox uid, a helper first
        sends SIGKILL to everything that uid may signal, which also stops a fork loop at once.
        """
        for _ in range(100):
            if self.uid is not None:
                helper = os.fork()
                if helper == 0:
                    try:
                        os.setresgid(self.uid, self.uid, self.uid)
                        os.setresuid(self.uid, self.uid, self.uid)
                        os.kill(-1, signal.SIGKILL)  # every process of this uid, except the helper
                    finally:
                        os._exit(0)
                os.waitpid(helper, 0)
            left = [p for p in _children() if p not in self.children]
            if not left:
                return
            for p in left:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in left:
                try:
                    os.waitpid(p, 0)
                except ChildProcessError:
                    pass

    # -- in the child (root until privileges are dropped) -------------------
    def _child(self, scratch: str) -> None:
        rep_fd = harness.REP_FD
        try:
            os.setsid()
            # fds 0-4 are already in place (devnull and the pipes); drop everything else,
            # the zygote socket included.
            os.closerange(5, self.fd_limit)
            if self.chroot:
                os.chroot(scratch)
                os.chdir("/")
            else:
                os.chdir(scratch)
            if self.uid is not None:
                os.setresgid(self.uid, self.uid, self.uid)
                os.setresuid(self.uid, self.uid, self.uid)  # also makes the process non-dumpable
            elif self.capdrop is not None:
                self.capdrop.drop()
            namespaces.set_pdeathsig(signal.SIGKILL)  # after the uid change, which clears it
            if not self.own_pidns and os.getppid() == 1:
                os._exit(SETUP_FAILED)  # zygote already gone
            if self.filter is not None:
                self.filter.install()
            os.write(rep_fd, _READY)
        except BaseException as e:
            try:
                write_frame(rep_fd, {"setup_error": f"{type(e).__name__}: {e}"})
            except BaseException:
                pass
            os._exit(SETUP_FAILED)
        harness.start(self.prepared)  # never returns


_random_inst = random._inst
_reseed = random.Random.__mro__[1].seed   # _random.Random.seed, the C method


_FOUR_FDS = struct.Struct("4i")


def _received_fds(anc) -> list[int]:
    fds: list[int] = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            if len(data) == 16:
                fds += _FOUR_FDS.unpack(data)
            else:
                fds += struct.unpack(f"{len(data) // 4}i", data[:len(data) - len(data) % 4])
    return fds


def _place(fds: list[int]) -> None:
    """Move received fds onto 1-4 (only needed when 1-4 were not all free on arrival)."""
    import fcntl
    tmp = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in fds]
    for fd in fds:
        if fd > 4:
            os.close(fd)
    for target, fd in zip(CHILD_FDS, tmp):
        os.dup2(fd, target, inheritable=False)
        os.close(fd)
    fds[:] = CHILD_FDS


def _children() -> list[int]:
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def _force_rmtree(path: str) -> None:
    def onerror(func, p, exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass
    shutil.rmtree(path, onerror=onerror)


def zygote_main(sock: socket.socket, cfg: SandboxConfig, seccomp_filter, scratch_base: str) -> None:
    """Entry point in the freshly forked zygote; never returns."""
    try:
        fd = sock.detach()
        if fd != SOCK_FD:
            os.dup2(fd, SOCK_FD)
            os.close(fd)
        sock = socket.socket(fileno=SOCK_FD)
        os.closerange(SOCK_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        # fd 0: /dev/null for every child's stdin; fds 1-4 stay occupied (by /dev/null) during
        # setup so that nothing opened here lands there, and are freed before the first spawn.
        nul = os.open(os.devnull, os.O_RDONLY)
        for target in range(5):
            if nul != target:
                os.dup2(nul, target)
        if nul > 4:
            os.close(nul)
        z = Zygote(sock, cfg, seccomp_filter, scratch_base)
        z.setup()
        os.closerange(1, 5)
        send_msg(sock, z.hello())
        z.serve()
    except BaseException as e:
        try:
            send_msg(sock, {"error": f"zygote setup failed: {type(e).__name__}: {e}"})
        except BaseException:
            pass
    os._exit(1)
