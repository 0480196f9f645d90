"""Warm worker pool, jobs, and the module-level check()/run() helpers."""
from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import select
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass

from .config import JOB_LIMITS, SandboxConfig
from .limits import Limits
from .protocol import FrameBuffer, ProtocolError, encode_frame, write_frame
from .verdict import Verdict

STARTUP_TIMEOUT_S = 60.0
# A job may run twice (a mispredicted prefetch is redone), each run after a child start of
# up to 30 s; beyond that the pool gives up on the worker and replaces it.
JOB_GRACE_S = 90.0


@dataclass(frozen=True)
class CheckJob:
    code: str
    test: str
    entry_point: str
    timeout_s: float = JOB_LIMITS.timeout_s
    memory_mb: int = JOB_LIMITS.memory_mb
    prelude: str | None = None   # optional trusted helper source (e.g. a HumanEval prompt)
    record_calls: bool = False   # return the entry point's calls and results in Verdict.calls
    candidate: str | None = None  # the submission's function the test gets as ``candidate``
                                  # (None: the one named ``entry_point``)


class WorkerDied(Exception):
    pass


_next_cpu = itertools.count()   # round robin over the allowed CPUs, across all pools of this process


def _pick_cpu(cfg: SandboxConfig) -> int | None:
    if not cfg.pin_workers:
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    return cpus[next(_next_cpu) % len(cpus)] if len(cpus) > 1 else None


class _Worker:
    """Pool-side handle on one worker process."""

    def __init__(self, cfg: SandboxConfig, cpu: int | None = None):
        from ._boot import WORKER_ENV, worker_argv
        self.cpu = cpu
        cmd_r, cmd_w = os.pipe()
        res_r, res_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                worker_argv(cmd_r, res_w, json.dumps(dict(cfg.to_dict(), _cpu=cpu))),
                pass_fds=(cmd_r, res_w), env=dict(WORKER_ENV), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=None, start_new_session=True, cwd="/")
        finally:
            os.close(cmd_r)
            os.close(res_w)
        self.cmd = cmd_w
        self.res = res_r
        self.frames = FrameBuffer(1 << 30)
        self.dead = False
        try:
            self.info = self._read(STARTUP_TIMEOUT_S)
        except WorkerDied:
            self.kill()
            raise
        self.fatal = self.info.get("fatal")

    def _read(self, timeout: float):
        end = time.monotonic() + timeout
        while True:
            try:
                return self.frames.pop()
            except LookupError:
                pass
            except ProtocolError as e:
                raise WorkerDied(f"garbled reply from worker: {e}") from None
            left = end - time.monotonic()
            if left <= 0:
                raise WorkerDied("worker did not answer in time")
            r, _, _ = select.select([self.res], [], [], left)
            if r:
                data = os.read(self.res, 1 << 20)
                if not data:
                    raise WorkerDied(f"worker exited (code {self.proc.poll()})")
                self.frames.feed(data)

    def request(self, job: dict, timeout: float) -> dict:
        try:
            write_frame(self.cmd, job)
            return self._read(timeout)
        except (OSError, WorkerDied) as e:
            self.dead = True
            raise WorkerDied(str(e)) from None

    def kill(self) -> None:
        self.dead = True
        for fd in (self.cmd, self.res):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._cleanup_dir()

    def close(self, timeout: float = 10.0) -> None:
        if not self.dead:
            try:
                os.write(self.cmd, encode_frame({"op": "quit"}))
            except OSError:
                pass
        for fd in (self.cmd, self.res):
            try:
                os.close(fd)
            except OSError:
                pass
        self.dead = True
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._cleanup_dir()

    def _cleanup_dir(self) -> None:
        """What a worker that did not exit on its own leaves: its scratch base and memory cgroup."""
        info = getattr(self, "info", None) or {}
        base = info.get("scratch_base")
        if base and os.path.basename(base).startswith("capa-sandbox-"):
            shutil.rmtree(base, ignore_errors=True)
        group = info.get("cgroup")
        if group and os.path.basename(group).startswith("capa-sandbox-"):
            for _ in range(50):   # its zygote and children die with the worker, a moment later
                try:
                    os.rmdir(group)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


class SandboxPool:
    """Warm sandbox workers, one per core by default. Thread-safe."""

    def __init__(self, workers: int | None = None, config: SandboxConfig | None = None):
        if workers is None:
            try:
                workers = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                workers = os.cpu_count() or 1
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.config = config or SandboxConfig()
        self.size = workers
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._closed = False
        try:
            for _ in range(workers):
                w = _Worker(self.config, _pick_cpu(self.config))
                self._all.append(w)
                self._idle.put(w)
        except BaseException:
            self.close()
            raise

    # -- info ---------------------------------------------------------------
    @property
    def layers(self) -> dict[str, bool]:
        return dict(self._all[0].info.get("layers", {})) if self._all else {}

    def worker_info(self, live: bool = False) -> list[dict]:
        """What each worker reported at start: pids, sandbox uid, scratch dir, active layers.

        ``live=True`` asks every worker (waiting for idle ones) and adds its spare child
        (``spare_pid``, ``spare_scratch``): the one started ahead for the next job.
        """
        if not live:
            with self._lock:
                return [dict(w.info) for w in self._all if not w.dead]
        taken = []
        try:
            for _ in range(self.size):
                taken.append(self._idle.get())
            return [w.request({"op": "info"}, STARTUP_TIMEOUT_S) for w in taken if not w.dead]
        finally:
            for w in taken:
                self._idle.put(w)

    # -- jobs ---------------------------------------------------------------
    def _execute(self, job: dict, timeout_s: float) -> Verdict:
        if self._closed:
            raise RuntimeError("SandboxPool is closed")
        last_error = ""
        for _attempt in range(2):  # a worker that died is replaced and the job retried once
            w = self._idle.get()
            try:
                if w.dead:
                    w = self._replace(w)
                reply = w.request(job, 2 * timeout_s + JOB_GRACE_S)
                if reply.get("retry"):
                    raise WorkerDied(str(reply.get("reason", "worker asked for a retry")))
                return Verdict.from_dict(reply)
            except WorkerDied as e:
                last_error = str(e)
                w = self._replace(w)
            except Exception as e:
                last_error = f"{type(e).__name__}: {e}"
                w = self._replace(w)
            finally:
                self._idle.put(w)
        return Verdict.sandbox_error(f"sandbox worker failed twice: {last_error}")

    def _replace(self, w: _Worker) -> _Worker:
        w.kill()
        new = _Worker(self.config, w.cpu)
        with self._lock:
            try:
                self._all[self._all.index(w)] = new
            except ValueError:
                self._all.append(new)
        return new

    def check(self, code: str, test: str, entry_point: str, timeout_s: float = JOB_LIMITS.timeout_s,
              memory_mb: int = JOB_LIMITS.memory_mb, prelude: str | None = None, record_calls: bool = False,
              candidate: str | None = None) -> Verdict:
        """``candidate``: the submission's function that the test's ``check`` receives, when it is
        not the one named ``entry_point`` (the dataset's name). Either way no name that the test
        or the prelude defines is replaced by the submission's."""
        _validate_check(code, test, entry_point, prelude, candidate)
        Limits(timeout_s, memory_mb).validate()
        return self._execute({"op": "check", "code": code, "test": test, "entry_point": entry_point,
                              "timeout_s": float(timeout_s), "memory_mb": int(memory_mb), "prelude": prelude,
                              "record_calls": bool(record_calls), "candidate": candidate},
                             float(timeout_s))

    def run(self, program: str, timeout_s: float = JOB_LIMITS.timeout_s,
            memory_mb: int = JOB_LIMITS.memory_mb) -> Verdict:
        if not isinstance(program, str):
            raise TypeError("program must be a str")
        Limits(timeout_s, memory_mb).validate()
        return self._execute({"op": "run", "program": program, "timeout_s": float(timeout_s),
                              "memory_mb": int(memory_mb)}, float(timeout_s))

    def check_many(self, jobs: list[CheckJob]) -> list[Verdict]:
        """Run jobs on all workers at once; verdicts come back in input order."""
        jobs = list(jobs)
        for j in jobs:
            _validate_check(j.code, j.test, j.entry_point, j.prelude, j.candidate)
            Limits(j.timeout_s, j.memory_mb).validate()
        results: list[Verdict | None] = [None] * len(jobs)
        it = iter(range(len(jobs)))
        it_lock = threading.Lock()

        def loop():
            while True:
                with it_lock:
                    i = next(it, None)
                if i is None:
                    return
                j = jobs[i]
                try:
                    results[i] = self.check(j.code, j.test, j.entry_point, j.timeout_s, j.memory_mb, j.prelude,
                                            j.record_calls, j.candidate)
                except Exception as e:
                    results[i] = Verdict.sandbox_error(f"{type(e).__name__}: {e}")

        n = min(self.size, len(jobs))
        threads = [threading.Thread(target=loop, daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return [r if r is not None else Verdict.sandbox_error("job was not run") for r in results]

    # -- lifetime -----------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            workers = list(self._all)
        for w in workers:
            try:
                w.close()
            except Exception:
                w.kill()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _validate_check(code, test, entry_point, prelude, candidate=None) -> None:
    if not isinstance(code, str):
        raise TypeError("code must be a str")
    if not isinstance(test, str):
        raise TypeError("test must be a str")
    if not isinstance(entry_point, str) or not entry_point.isidentifier():
        raise ValueError(f"entry_point must be a Python identifier, got {entry_point!r}")
    if candidate is not None and (not isinstance(candidate, str) or not candidate.isidentifier()):
        raise ValueError(f"candidate must be a Python identifier or None, got {candidate!r}")
    if prelude is not None and not isinstance(prelude, str):
        raise TypeError("prelude must be a str or None")


_default_pool: SandboxPool | None = None
_default_lock = threading.Lock()


def default_pool() -> SandboxPool:
    global _default_pool
    with _default_lock:
        if _default_pool is None or _default_pool._closed:
            _default_pool = SandboxPool()
            atexit.register(_default_pool.close)
        return _default_pool


def check(code: str, test: str, entry_point: str, timeout_s: float = JOB_LIMITS.timeout_s,
          memory_mb: int = JOB_LIMITS.memory_mb, prelude: str | None = None, candidate: str | None = None) -> Verdict:
    return default_pool().check(code, test, entry_point, timeout_s, memory_mb, prelude, candidate=candidate)


def run(program: str, timeout_s: float = JOB_LIMITS.timeout_s, memory_mb: int = JOB_LIMITS.memory_mb) -> Verdict:
    return default_pool().run(program, timeout_s, memory_mb)
