"""run(): a whole program in a sandboxed child; passed when it exits with status 0."""
from __future__ import annotations

import time

from .judge import Resources
from .limits import cpu_limit_s
from .outcome import Happened, decide
from .protocol import SETUP_TIMEOUT_S
from .remote import clean_info, safe_str
from .session import ChildGone, ChildProtocolError, ChildTimeout
from .spawner import SpawnError
from .verdict import Verdict


class ProgramRun:
    def __init__(self, res: Resources, program: str, timeout_s: float, memory_mb: int):
        self.res = res
        self.program = program
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb

    def execute(self) -> Verdict:
        t0 = time.monotonic()
        memory = self.res.memory
        oom_before = 0
        if memory is not None:
            memory.set_limit(self.memory_mb)
            oom_before = memory.oom_kills()
        sess = self.res.spawner.take()   # SpawnError: the worker is replaced (worker.py)
        seen: dict = {"run_program": True, "time_limit_s": self.timeout_s}
        frames: list[dict] = []
        ready = False
        try:
            r = sess.recv(time.monotonic() + SETUP_TIMEOUT_S)
            if r.get("ready") is not True:
                seen["setup_error"] = f"sandbox setup failed: {safe_str(r.get('setup_error'), 500)}"
            else:
                ready = True
                deadline = time.monotonic() + self.timeout_s
                sess.send({"op": "run", "program": self.program, "timeout_s": self.timeout_s,
                           "memory_mb": self.memory_mb}, deadline)
                sess.wait_exit(deadline, frames)
        except ChildTimeout:
            if ready:
                seen["timed_out"] = True
            else:
                seen["setup_error"] = "the sandboxed process did not start in time"
        except ChildGone:
            pass
        except ChildProtocolError as e:
            if not ready:
                seen["setup_error"] = f"sandbox setup failed: {e}"
        reaped = self.res.spawner.release(sess, need_status=True)
        if "setup_error" in seen:   # the child could not set itself up: replace the worker, retry
            raise SpawnError(seen["setup_error"])
        frames += sess.late_frames
        if ready and (not frames or frames[0].get("limited") is not True):
            # the child's acknowledgement of the job's limits comes before the program runs:
            # without it the program never ran (our side failed, never the submission)
            why = frames[0].get("limits_error", "no acknowledgement") if frames else "no acknowledgement"
            seen = {"setup_error": f"the sandboxed process could not set the job's limits: {safe_str(why, 500)}"}
        frames = frames[1:]
        exc = next((clean_info(f["exc"]) for f in frames if "exc" in f), None)
        h = Happened(ready=ready, exc=exc, exit_status=reaped.get("status"), cpu_s=float(reaped.get("cpu_s", 0.0)),
                     cpu_limit_s=float(cpu_limit_s(self.timeout_s)), forbidden=tuple(sess.forbidden()),
                     oom_killed=memory is not None and memory.oom_kills() > oom_before, **seen)
        status, failure = decide(h)
        return Verdict(status=status, failure=failure, stdout=sess.stdout.text(), stderr=sess.stderr.text(),
                       wall_s=time.monotonic() - t0, layers=dict(self.res.layers or {}), notes=list(self.res.notes))
