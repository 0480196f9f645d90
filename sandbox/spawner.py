"""Children on demand: the worker's client of its zygote, and the spare child kept ready.

A child killed after its verdict is reaped (and its scratch dir removed) by the zygote in
the worker's next zygote request when the verdict does not depend on how it ended:
usually the request that starts the next spare child, right after the verdict was sent.
A failure to start or clean up a child is never a verdict: the Spawner records it and
raises SpawnError from then on, and the worker asks the pool to replace it.
"""
from __future__ import annotations

import os
import socket

from .protocol import REAP, REAPED, SPAWN, SPAWNED
from .session import ChildSession


class SpawnError(Exception):
    """The zygote could not start or clean up a child (our fault, never the submission's)."""


class ZygoteClient:
    def __init__(self, sock: socket.socket, pid: int):
        self.sock = sock
        self.pid = pid
        self.dead = False
        self._pending: list[int] | None = None   # our pipe ends for a spawn whose answer is unread

    def _gone(self) -> SpawnError:
        self.dead = True
        return SpawnError("the zygote is gone")

    def start_spawn(self, reap_first: int = 0) -> None:
        """Ask for a child (after reaping ``reap_first``, a killed child, when not 0) without
        waiting for the answer; end_spawn() collects it. One request at a time."""
        assert self._pending is None
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        theirs = [out_w, err_w, req_r, rep_w]   # in the order of the child's fds 1-4
        ours = [req_w, rep_r, out_r, err_r]
        try:
            socket.send_fds(self.sock, [SPAWN.pack(b"s", reap_first)], theirs)
        except OSError:
            for fd in ours:
                os.close(fd)
            raise self._gone() from None
        finally:
            for fd in theirs:
                os.close(fd)
        self._pending = ours

    def end_spawn(self):
        """Returns (pid, job number, [req_w, rep_r, out_r, err_r]): our ends of its pipes."""
        ours, self._pending = self._pending, None
        try:
            msg = self.sock.recv(1024)
        except OSError:
            msg = b""
        if not msg or msg[:1] != b"p" or len(msg) != SPAWNED.size:
            for fd in ours:
                os.close(fd)
            if not msg:
                raise self._gone()
            raise SpawnError(f"zygote could not spawn a child: {msg[1:].decode(errors='replace')}")
        _, pid, jobno = SPAWNED.unpack(msg)
        return pid, jobno, ours

    @property
    def spawning(self) -> bool:
        return self._pending is not None

    def spawn(self, reap_first: int = 0):
        self.start_spawn(reap_first)
        return self.end_spawn()

    def reap(self, pid: int) -> dict:
        try:
            self.sock.send(REAP.pack(b"r", pid))
            msg = self.sock.recv(1024)
        except OSError:
            raise self._gone() from None
        if not msg:
            raise self._gone()
        if msg[:1] != b"R" or len(msg) != REAPED.size:
            raise SpawnError(f"zygote could not reap child {pid}: {msg[1:].decode(errors='replace')}")
        _, status, cpu_s, maxrss_kb, minflt = REAPED.unpack(msg)
        return {"status": status, "cpu_s": cpu_s, "maxrss_kb": maxrss_kb, "minflt": minflt}


class Spawner:
    """Hands out children; keeps one spare, started while the worker waits for its next job.

    Any failure to start or reap a child (the zygote's cleanup included) breaks the spawner
    for good: ``broken`` says why, and take()/release() raise SpawnError from then on.
    """

    def __init__(self, zygote: ZygoteClient, output_cap: int, max_message: int, max_values: int,
                 kill_group: bool = False):
        self.zygote = zygote
        self.output_cap = output_cap
        self.max_message = max_message
        self.max_values = max_values
        self.kill_group = kill_group
        self.spare: ChildSession | None = None
        self.unreaped: list[int] = []   # killed children the zygote has not reaped yet
        self.broken: str | None = None

    def _session(self, spawned) -> ChildSession:
        return ChildSession(spawned, self.output_cap, self.max_message, self.max_values, kill_group=self.kill_group)

    def _fail(self, e: BaseException) -> SpawnError:
        self.broken = self.broken or (str(e) or type(e).__name__)
        self.spare = None
        self.unreaped.clear()
        return e if isinstance(e, SpawnError) else SpawnError(self.broken)

    def _check(self) -> None:
        if self.broken is None and self.zygote.dead:
            self.broken = "the zygote is gone"
        if self.broken is not None:
            raise SpawnError(self.broken)

    def settle(self) -> None:
        """Collect the answer to a spawn request sent ahead (see after_job) as the spare."""
        if self.zygote.spawning:
            try:
                self.spare = self._session(self.zygote.end_spawn())
            except (SpawnError, OSError) as e:
                self._fail(e)

    def _reap_extra(self) -> int:
        """Reap all killed children but one, which is returned to be reaped with the next spawn."""
        while len(self.unreaped) > 1:
            self.zygote.reap(self.unreaped.pop())
        return self.unreaped.pop() if self.unreaped else 0

    def _new(self) -> ChildSession:
        try:
            return self._session(self.zygote.spawn(self._reap_extra()))
        except (SpawnError, OSError) as e:
            raise self._fail(e) from None

    def take(self) -> ChildSession:
        self.settle()
        self._check()
        s, self.spare = self.spare, None
        if s is not None and not s.is_dead():
            return s
        if s is not None:
            self.release(s)
        return self._new()

    def release(self, sess: ChildSession, need_status: bool = False) -> dict:
        """End a child after its job: with ``need_status``, reap it now and return how it ended;
        otherwise kill it and leave the reaping for the next zygote request."""
        if need_status:
            self.settle()
            try:
                return sess.finish(self.zygote.reap)
            except (SpawnError, OSError) as e:
                raise self._fail(e) from None
        sess.retire()
        self.unreaped.append(sess.pid)
        return {}

    def after_job(self, prestart: bool) -> None:
        """After a verdict went out: reap what was killed and, with ``prestart``, ask for the next
        spare in the same zygote request -- without waiting for it: the zygote forks while the
        worker reads and prepares the next job (take() collects the answer)."""
        try:
            self.settle()
            self._check()
            if prestart and self.spare is None:
                self.zygote.start_spawn(self._reap_extra())
                return
            while self.unreaped:
                self.zygote.reap(self.unreaped.pop())
        except (SpawnError, OSError) as e:
            self._fail(e)

    def refill(self) -> None:
        self.settle()
        if self.spare is None and self.broken is None and not self.zygote.dead:
            try:
                self.spare = self._new()
            except SpawnError:
                pass
