"""The warm worker: a fresh interpreter started by the pool (never forked from the caller).

Startup: pre-import the modules submissions use, compile the seccomp filter,
then fork the zygote (before any job, so it stays pristine). Afterwards the
worker reads jobs from the pool, runs the trusted side of each (judge.py) and
writes back verdicts. It never executes submission code itself.

Pool <-> worker: length-prefixed JSON frames over two pipes whose fd numbers
are given on the command line.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback


def _exited(pid: int, block: bool = False) -> bool:
    try:
        done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
    except ChildProcessError:
        return True
    return done == pid


def scratch_dir_cleanup(base: str) -> None:
    """Remove the worker's scratch base (the zygote's mounts died with its mount namespace)."""
    from .scratch import remove_tree
    try:
        remove_tree(base)
    except OSError:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str]) -> None:
    cmd_fd, res_fd = int(argv[0]), int(argv[1])
    # Imports after argv parsing so that a bad invocation fails fast.
    from .config import SandboxConfig
    from .preload import preload
    from .protocol import read_frame, write_frame

    raw = json.loads(argv[2])
    cfg = SandboxConfig.from_dict(raw)
    if raw.get("_cpu") is not None:
        # This worker, its zygote and every child it forks share one CPU: their work is a
        # chain of hand-offs, and wake-ups across CPUs would leave both CPUs idle at times.
        try:
            os.sched_setaffinity(0, {int(raw["_cpu"])})
        except (AttributeError, OSError, ValueError):
            pass
    missing = preload(cfg.preload_extra)

    from . import cgroups, judge, program, seccomp_filter
    from .compile_helper import CompileHelper
    from .spawner import SpawnError, Spawner, ZygoteClient
    from .verdict import Verdict
    from .zygote import recv_msg, zygote_main

    fatal = None
    filters = None
    if cfg.seccomp:
        try:
            # the strict filter, and (only where a memory cgroup exists to make them harmless)
            # one that leaves SysV IPC to children with their own
            # IPC namespace: the zygote picks one
            filters = {False: seccomp_filter.CompiledFilter(seccomp_filter.build_bpf(allow_ipc=False))}
        except Exception as e:
            fatal = f"seccomp filter unavailable: {e}"

    base = tempfile.mkdtemp(prefix="capa-sandbox-")
    os.chmod(base, 0o711)
    group, cgroup_note = cgroups.open_group(cfg.memory_cgroup, cfg.cgroup_parent, os.path.basename(base))
    if group is not None and filters is not None:
        filters[True] = seccomp_filter.CompiledFilter(seccomp_filter.build_bpf(allow_ipc=True))
    zpid = None
    zclient = None
    hello = {"pid": os.getpid(), "scratch_base": base, "missing_preload": missing,
             "cgroup": group.path if group else None}
    if fatal is None:
        parent_sock, child_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        zpid = os.fork()
        if zpid == 0:
            parent_sock.close()
            os.close(cmd_fd)
            os.close(res_fd)
            zygote_main(child_sock, cfg, filters, base, group.procs if group else None, cgroup_note)  # no return
        child_sock.close()
        msg, _ = recv_msg(parent_sock)
        if msg is None or "error" in msg:
            fatal = (msg or {}).get("error", "the zygote exited during setup")
        else:
            hello.update(msg)
            zclient = ZygoteClient(parent_sock, zpid)
    hello["fatal"] = fatal
    compiler = CompileHelper(filters[False] if filters else None)
    if fatal is None:
        compiler.start()   # now, off the first job's clock
        hello["compile_helper_pid"] = compiler.pid
    write_frame(res_fd, hello)
    layers = hello.get("layers", {})
    spawner = (Spawner(zclient, cfg.output_cap_bytes, cfg.max_message_bytes, cfg.max_reply_values,
                       kill_group=not layers.get("pid_namespace")) if zclient else None)
    if spawner and cfg.prestart_child:
        spawner.refill()
    res = judge.Resources(spawner, cfg, compiler, group if layers.get("memory_cgroup") else None, layers,
                          tuple(hello.get("verdict_notes", ())))

    try:
        while True:
            job = read_frame(cmd_fd)
            if job is None or job.get("op") == "quit":
                break
            t0 = time.monotonic()
            try:
                if fatal is not None:
                    v = Verdict.sandbox_error(fatal)
                elif job["op"] == "check":
                    v = judge.CheckRun(res, job["code"], job["test"], job["entry_point"], float(job["timeout_s"]),
                                       int(job["memory_mb"]), job.get("prelude"),
                                       record_calls=bool(job.get("record_calls")),
                                       candidate=job.get("candidate")).execute()
                elif job["op"] == "run":
                    v = program.ProgramRun(res, job["program"], float(job["timeout_s"]), int(job["memory_mb"])).execute()
                elif job["op"] == "info":
                    if spawner:
                        spawner.settle()
                    spare = spawner.spare if spawner else None
                    write_frame(res_fd, dict(hello, spare_pid=spare.pid if spare else None,
                                             spare_scratch=spare.scratch_name if spare else None,
                                             compile_helper_pid=compiler.pid))
                    continue
                else:
                    v = Verdict.sandbox_error(f"unknown job op {job.get('op')!r}")
            except SpawnError as e:
                # The zygote could not start or clean up a child (or is gone): this worker cannot
                # be trusted with another job. Ask the pool to replace it and to retry the job.
                write_frame(res_fd, {"retry": True, "reason": f"the sandbox could not start or clean up a child: {e}"})
                break
            except Exception as e:  # a bug on our side: never blame the submission
                v = Verdict.sandbox_error(f"internal error: {type(e).__name__}: {e}\n{traceback.format_exc()}",
                                          time.monotonic() - t0)
            if zpid and (zclient.dead or _exited(zpid)):
                # The zygote is gone (killed from outside, or crashed): this worker cannot run
                # anything any more. Ask the pool to replace it and to retry the job.
                write_frame(res_fd, {"retry": True, "reason": "the sandbox zygote exited"})
                break
            write_frame(res_fd, v.to_dict())
            if spawner:
                # Reap the job's (already killed) child; start the next one while the pool
                # prepares the next job.
                spawner.after_job(cfg.prestart_child)
                if spawner.broken:
                    break   # the verdict stands; the pool replaces this worker before its next job
    finally:
        compiler.stop()
        if zclient is not None:
            zclient.sock.close()
        if zpid:
            try:
                os.waitpid(zpid, 0)
            except ChildProcessError:
                pass
        if group is not None:
            group.remove()
        scratch_dir_cleanup(base)
