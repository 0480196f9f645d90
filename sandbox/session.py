"""Worker-side handle on one sandboxed child: talk to it, collect its output, kill it.

All waiting is done with poll() on the child's pipes and its pidfd, with the
job's deadline as the poll timeout: no sleeps, no polling loops. Everything the
child sends is read through one FrameBuffer per child that bounds the bytes and
JSON values of all its replies together (SandboxConfig.max_message_bytes,
max_reply_values): what it makes the trusted side build is bounded.

A child is killed (SIGKILL from the worker) as soon as its job is decided,
before the verdict goes out. Reaping it (wait status, removing its scratch
dir) is the zygote's (see spawner.py).
"""
from __future__ import annotations

import os
import select
import signal
import time

from .protocol import FrameBuffer, ProtocolError, TooLarge, encode_request


class ChildTimeout(Exception):
    pass


class ChildGone(Exception):
    """The child exited, or closed its reply channel, while we waited on it."""


class ChildProtocolError(Exception):
    pass


class ChildTooLarge(ChildProtocolError):
    """The child's replies went past the bytes or values a job may send."""


class CappedOutput:
    def __init__(self, cap: int):
        self.cap = cap
        self.buf = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        if len(data) > room:
            self.dropped += len(data) - max(room, 0)

    def text(self) -> str:
        s = self.buf.decode("utf-8", "replace")
        if self.dropped:
            s += f"\n[sandbox: output truncated, {self.dropped} more bytes not shown]\n"
        return s


_NO_FRAME = object()
_IN = select.POLLIN | select.POLLPRI
_OUT = select.POLLOUT


class ChildSession:
    def __init__(self, spawned: tuple, output_cap: int, max_message: int, max_values: int,
                 kill_group: bool = False):
        """``spawned``: (pid, job number, our ends [req_w, rep_r, out_r, err_r]) from the zygote."""
        self.kill_group = kill_group   # no pid namespace: the child's process group is what it started
        self.pid, jobno, fds = spawned
        self.scratch_name = f"j{jobno}"
        self.req, self.rep, self.out, self.err = fds
        try:
            # Safe against pid reuse: the child stays a zombie until the zygote reaps it,
            # which it does only when this worker asks.
            self.pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self.pidfd = None
        for fd in (self.req, self.rep, self.out, self.err):
            os.set_blocking(fd, False)
        self.stdout = CappedOutput(output_cap)
        self.stderr = CappedOutput(output_cap)
        # one budget for everything the child sends: each frame, and all of them together
        self.frames = FrameBuffer(max_message, total_bytes=max_message, total_values=max_values)
        self.events: list[tuple[str, int]] = []   # (forbidden action, call number it happened in)
        self.exited = False        # the pidfd reported the child's death (or all pipes hit EOF)
        self.open_reads = {self.rep, self.out, self.err}
        self.outgoing = bytearray()   # queued request bytes; the first ``sent`` of them are written
        self.sent = 0
        self.write_failed = False  # the request pipe is broken (the child is gone)
        self.poller = select.poll()
        for fd in self.open_reads:
            self.poller.register(fd, _IN)
        if self.pidfd is not None:
            self.poller.register(self.pidfd, _IN)
        self.req_registered = False
        self.reaped: dict | None = None
        self.late_frames: list[dict] = []
        self.closed = False
        self.killed = False

    # -- frames ---------------------------------------------------------------
    def _next_frame(self):
        while True:
            try:
                f = self.frames.pop_or(_NO_FRAME)
            except TooLarge as e:
                raise ChildTooLarge(str(e)) from None
            except ProtocolError as e:
                raise ChildProtocolError(str(e)) from None
            if f is _NO_FRAME:
                return None
            if type(f) is dict and f.get("event") == "forbidden":
                what, seq = f.get("what"), f.get("seq")
                if type(what) is str and len(self.events) < 50:
                    self.events.append((what[:100], seq if type(seq) is int else 0))
                continue
            if type(f) is not dict:
                raise ChildProtocolError("frame is not an object")
            return f

    # -- I/O ------------------------------------------------------------------
    def _read(self, fd: int) -> bool:
        """Read what is available; False on EOF."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            self.open_reads.discard(fd)
            try:
                self.poller.unregister(fd)
            except KeyError:
                pass
            return False
        if fd == self.rep:
            self.frames.feed(data)
            if self.frames.pending() > self.frames.max_bytes + 8:
                raise ChildTooLarge(f"a reply of more than {self.frames.max_bytes} bytes")
        elif fd == self.out:
            self.stdout.add(data)
        else:
            self.stderr.add(data)
        return True

    def _drain(self) -> None:
        """After the child died: read everything still buffered in its pipes."""
        for fd in list(self.open_reads):
            for _ in range(100000):
                try:
                    if not self._read(fd):
                        break
                except ChildProtocolError:
                    break
                if fd in self.open_reads:
                    try:
                        # still open: stop when nothing is buffered (a survivor could hold the pipe)
                        if not select.select([fd], [], [], 0)[0]:
                            break
                    except OSError:
                        break

    def _mark_exited(self) -> None:
        self.exited = True
        if self.pidfd is not None:
            try:
                self.poller.unregister(self.pidfd)
            except KeyError:
                pass
        self._drain()

    def _pump_once(self, deadline: float) -> None:
        timeout = deadline - time.monotonic()
        if timeout <= 0:
            raise ChildTimeout()
        want_out = self.pending_out()
        if want_out != self.req_registered:
            if want_out:
                self.poller.register(self.req, _OUT)
            else:
                self.poller.unregister(self.req)
            self.req_registered = want_out
        for fd, ev in self.poller.poll(max(1, int(timeout * 1000 + 0.999))):
            if fd == self.req:
                try:
                    self._write()
                except BlockingIOError:
                    pass
                except OSError:  # EPIPE: the child closed its request pipe or died
                    # Nothing more can be sent; what the child wrote before is still read
                    # (recv must not fail before it has returned the frames already there).
                    self._drop_outgoing()
                    self.write_failed = True
            elif fd == self.pidfd:
                self._mark_exited()
            else:
                self._read(fd)
        if self.pidfd is None and not self.open_reads:
            self.exited = True

    def send(self, obj, deadline: float) -> None:
        self.send_frame(encode_request(obj), deadline)

    def queue(self, obj) -> None:
        self.queue_frame(encode_request(obj))

    def queue_frame(self, frame: bytes) -> None:
        """Queue a frame without waiting: what does not fit in the pipe now is written while
        the judge waits for replies (recv), under that wait's deadline."""
        if self.exited or self.write_failed:
            return
        self.outgoing += frame
        if not self.req_registered:
            try:
                self._write()
            except BlockingIOError:
                pass
            except OSError:
                self._drop_outgoing()
                self.write_failed = True

    def pending_out(self) -> bool:
        return self.sent < len(self.outgoing)

    def _write(self) -> None:
        """Write what the pipe takes now (an offset into one buffer: no copy of the rest)."""
        with memoryview(self.outgoing) as view:
            self.sent += os.write(self.req, view[self.sent:])
        if self.sent == len(self.outgoing):
            self._drop_outgoing()

    def _drop_outgoing(self) -> None:
        self.outgoing.clear()
        self.sent = 0

    def send_frame(self, frame: bytes, deadline: float) -> None:
        """Send an already encoded frame, waiting (up to ``deadline``) until it is written."""
        if self.exited or self.write_failed:
            raise ChildGone()
        self.queue_frame(frame)
        while self.pending_out():
            if self.exited:
                raise ChildGone()
            self._pump_once(deadline)
        if self.write_failed:
            raise ChildGone()

    def recv(self, deadline: float) -> dict:
        while True:
            f = self._next_frame()
            if f is not None:
                return f
            if self.exited or self.rep not in self.open_reads:
                raise ChildGone()
            self._pump_once(deadline)

    def is_dead(self) -> bool:
        """Has the child already exited (e.g. a spare whose zygote was killed)?"""
        if self.exited:
            return True
        if self.pidfd is not None:
            return bool(select.select([self.pidfd], [], [], 0)[0])
        return False

    def forbidden(self, upto: int | None = None) -> list[str]:
        """Forbidden actions reported, optionally only those from calls numbered <= upto."""
        out: list[str] = []
        for what, seq in self.events:
            if (upto is None or seq <= upto) and what not in out:
                out.append(what)
        return out

    def request(self, obj, deadline: float) -> dict:
        self.send(obj, deadline)
        return self.recv(deadline)

    def wait_exit(self, deadline: float, frames: list | None = None) -> list[dict]:
        """Wait for the child to end on its own; return the frames it sent meanwhile (also
        appended to ``frames`` as they come, so that none is lost when the wait times out)."""
        frames = [] if frames is None else frames
        while True:
            f = self._next_frame()
            if f is not None:
                frames.append(f)
                continue
            if self.exited:
                return frames
            self._pump_once(deadline)

    def kill(self) -> None:
        """SIGKILL the child (and with a pid namespace, the kernel kills everything it started;
        without one, its process group). The zygote reaps it later."""
        if self.killed:
            return
        self.killed = True
        try:
            if self.pidfd is not None:
                # through the pidfd: never another process, even if the zygote died and the
                # child was reaped (and its pid reused) elsewhere
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        if self.kill_group:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def _collect_late(self) -> None:
        self._drain()
        try:
            while True:
                f = self._next_frame()
                if f is None:
                    break
                self.late_frames.append(f)
        except ChildProtocolError:
            pass

    def retire(self) -> None:
        """Kill the child, keep the output it wrote, close our ends. It is left to be reaped."""
        if self.closed:
            return
        try:
            self.kill()
            self._collect_late()
        finally:
            self.close()

    def finish(self, reap) -> dict:
        """Kill the child, have the zygote reap it now (``reap(pid)``), and return how it ended."""
        if self.closed:
            return self.reaped or {}
        try:
            self.kill()
            self.reaped = reap(self.pid)
            self._collect_late()
        finally:
            self.close()
        return self.reaped

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for fd in (self.req, self.rep, self.out, self.err, self.pidfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
