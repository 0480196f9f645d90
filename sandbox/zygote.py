"""The zygote: a pristine, trusted process that forks one sandboxed child per execution.

The worker forks the zygote right after pre-importing modules and compiling
the seccomp filter, before it handles any job, so a child forked from the
zygote never holds a test (or an earlier job's data) in its memory.

Layers set up once (zygote_layers.py) and inherited by every child: private
network namespace; private mount namespace with a size-limited tmpfs for scratch
dirs; scrubbed environment; import guard; job-independent rlimits (file size,
open files, threads, core dumps); no_new_privs; no supplementary groups.
Per child: fresh pid and IPC namespaces (the child is pid 1 of its own, so
everything it starts dies with it; SysV IPC objects it makes die with it too),
the worker's memory cgroup, a new session, a chroot into its own scratch
directory, the address-space and CPU rlimits of the job, an unprivileged uid,
and the seccomp filter (compiled once by the worker, only loaded here).

Without root, the zygote first enters an unprivileged user namespace (where the
kernel allows one) and sets up the same layers inside it; children then keep the
user's uid but lose every capability, and each still gets its own pid and IPC
namespaces (from clone).

A scratch dir that cannot be removed marks the zygote broken: it refuses every
later spawn, and the worker is replaced.

Zygote <-> worker: fixed-size struct messages over a SOCK_SEQPACKET socketpair
(JSON only for the one-time hello). The worker creates each child's pipes and
passes the child's ends along with the spawn request (SCM_RIGHTS); they arrive
on fds 1-4, where the child needs them, so the child only closes the rest.
"""
from __future__ import annotations

import json
import os
import random
import resource
import signal
import socket
import struct

from . import harness, namespaces
from .config import SandboxConfig
from .protocol import REAP, REAPED, REP_FD, SETUP_FAILED_CODE, SPAWN, SPAWNED, encode_frame, write_frame
from .zygote_layers import SAFE_ENV, ZygoteLayers

__all__ = ["SAFE_ENV", "Zygote", "zygote_main", "recv_msg", "send_msg"]

MSG_MAX = 1 << 16
# The zygote's fd layout: 0 = /dev/null (each child opens its own), 1-4 = free between spawns (a
# spawn request's four pipe ends land there: the child's stdout, stderr, requests, replies),
# 5 = the socket to the worker, >= 6 = the zygote's own. A child closes everything from 5 up.
SOCK_FD = 5
CHILD_FDS = [1, 2, 3, 4]
_READY = encode_frame({"ready": True})


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


class Zygote(ZygoteLayers):
    """The zygote's loop: spawn and reap children on the worker's requests."""

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
        if self.broken:
            raise RuntimeError(f"this zygote failed to clean up after a child: {self.broken}")
        if fds != CHILD_FDS:
            _place(fds)
        self.jobs += 1
        jobno = self.jobs
        try:
            path = self.scratch.make(f"j{jobno}")
        except BaseException:
            os.closerange(1, 5)
            raise
        try:
            # raw_fork skips CPython's after-fork reseed: seed here, before the fork, so each
            # child starts from its own fresh stream without writing the state itself.
            # (random.seed() with no argument, minus the Python-level wrapper: a full state
            # from os.urandom.)
            _reseed(_random_inst)
            _random_inst.gauss_next = None
            pid = self._fork()
            if pid == 0:
                try:
                    self._child(path)
                finally:
                    os._exit(SETUP_FAILED_CODE)
            self.children[pid] = path
            if self.cgroup_fd is not None:
                os.write(self.cgroup_fd, b"%d" % pid)   # before the worker learns of the child
        except BaseException:
            os.closerange(1, 5)
            self._cleanup_failed_spawn(path)
            raise
        os.closerange(1, 5)  # the child's ends stay with the child only
        return SPAWNED.pack(b"p", pid, jobno)

    def _fork(self) -> int:
        """Fork a child into its own pid and IPC namespaces (where those layers are on)."""
        ipc = namespaces.CLONE_NEWIPC if self.ipc_fd is not None else 0
        if self.pidns_fd is not None:
            # A fresh pid namespace for this child only. (pid_for_children is pointed back
            # at our own namespace first -- it still names the previous child's -- so that
            # nothing of this runs after the fork.)
            namespaces.setns(self.pidns_fd, namespaces.CLONE_NEWPID)
            namespaces.unshare(namespaces.CLONE_NEWPID | ipc)
            pid = namespaces.raw_fork()
        elif self.clone_flags:
            return namespaces.clone_fork(self.clone_flags)
        else:
            if ipc:
                namespaces.unshare(ipc)
            pid = namespaces.raw_fork()
        if ipc and pid:
            namespaces.setns(self.ipc_fd, namespaces.CLONE_NEWIPC)   # the child's stays its own
        return pid

    def _cleanup_failed_spawn(self, path: str) -> None:
        for pid in [p for p, d in self.children.items() if d == path]:
            self._reap(pid, report=False)
        if path not in self.children.values():
            try:
                self.scratch.remove(path)
            except OSError as e:
                self.broken = f"{path}: {e}"

    def _reap(self, pid: int, report: bool = True) -> bytes:
        """Kill (if the worker has not yet), wait for and clean up after a child. ``report``:
        return its wait status and resource use (REAPED), else nothing. A scratch dir that
        cannot be removed marks the zygote broken: the worker is then replaced."""
        path = self.children.pop(pid, None)
        if path is None:
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
            self.scratch.remove(path)
        except OSError as e:
            self.broken = self.broken or f"{path}: {e}"
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
    def _child(self, path: str) -> None:
        try:
            os.setsid()
            # fds 1-4 are already in place (the pipes); drop everything else, the zygote
            # socket included. fd 0 is the child's own /dev/null, opened here: a description
            # shared with other children would carry its flags and owner (F_SETFL, F_SETSIG)
            # from one job to the next.
            os.closerange(5, self.fd_limit)
            os.close(0)
            os.open(os.devnull, os.O_RDONLY)   # (the lowest free fd: 0)
            if self.chroot:
                os.chroot(path)
                os.chdir("/")
            else:
                os.chdir(path)
            if self.uid is not None:
                os.setresgid(self.uid, self.uid, self.uid)
                os.setresuid(self.uid, self.uid, self.uid)  # also makes the process non-dumpable
            elif self.capdrop is not None:
                self.capdrop.drop()
            namespaces.set_pdeathsig(signal.SIGKILL)  # after the uid change, which clears it
            if not self.own_pidns and os.getppid() == 1:
                os._exit(SETUP_FAILED_CODE)  # zygote already gone
            if self.filter is not None:
                self.filter.install()
            os.write(REP_FD, _READY)
        except BaseException as e:
            try:
                write_frame(REP_FD, {"setup_error": f"{type(e).__name__}: {e}"})
            except BaseException:
                pass
            os._exit(SETUP_FAILED_CODE)
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


def zygote_main(sock: socket.socket, cfg: SandboxConfig, filters: dict | None, scratch_base: str,
                cgroup_procs: str | None = None, cgroup_note: str | None = None) -> None:
    """Entry point in the freshly forked zygote; never returns."""
    try:
        fd = sock.detach()
        if fd != SOCK_FD:
            os.dup2(fd, SOCK_FD)
            os.close(fd)
        sock = socket.socket(fileno=SOCK_FD)
        os.closerange(SOCK_FD + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        # fd 0: /dev/null (each child replaces it with its own); fds 1-4 stay occupied (by /dev/null) during
        # setup so that nothing opened here lands there, and are freed before the first spawn.
        nul = os.open(os.devnull, os.O_RDONLY)
        for target in range(5):
            if nul != target:
                os.dup2(nul, target)
        if nul > 4:
            os.close(nul)
        z = Zygote(sock, cfg, filters, scratch_base, cgroup_procs, cgroup_note)
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
