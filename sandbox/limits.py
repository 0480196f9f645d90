"""Resource limits applied to the submission process (rlimits)."""
from __future__ import annotations

import math
import resource
from dataclasses import dataclass

from .config import JOB_LIMITS

MiB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    timeout_s: float = JOB_LIMITS.timeout_s
    memory_mb: int = JOB_LIMITS.memory_mb

    def validate(self) -> None:
        if not (isinstance(self.timeout_s, (int, float)) and self.timeout_s > 0 and math.isfinite(self.timeout_s)):
            raise ValueError(f"timeout_s must be a positive number, got {self.timeout_s!r}")
        if not (isinstance(self.memory_mb, int) and self.memory_mb > 0):
            raise ValueError(f"memory_mb must be a positive integer, got {self.memory_mb!r}")


def vm_size_bytes() -> int:
    """Current address-space size of this process (VmSize)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    return pages * resource.getpagesize()


def cpu_limit_s(timeout_s: float) -> int:
    """RLIMIT_CPU for a job: a backstop behind the wall-clock deadline kept by the worker."""
    return int(math.ceil(timeout_s)) + 1


def shared_rlimits(cfg, scoped_nproc: bool = True) -> dict[int, int]:
    """Limits that do not depend on the job: set once in the zygote, inherited by every child.

    (RLIMIT_NPROC does not bind root, so it takes effect in the child once the uid is dropped.)
    ``scoped_nproc``: whether RLIMIT_NPROC counts only the sandbox's own processes (a
    dedicated uid, or a user namespace). Otherwise it is left out: it would count every
    process and thread of the user on the machine and bind the zygote's own forks.
    """
    limits = {
        resource.RLIMIT_FSIZE: cfg.max_file_mb * MiB,
        resource.RLIMIT_NOFILE: cfg.max_open_files,
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_MEMLOCK: 0,
        resource.RLIMIT_MSGQUEUE: 0,
    }
    if scoped_nproc:
        limits[resource.RLIMIT_NPROC] = cfg.max_threads
    return limits


def job_rlimits(limits: Limits, base_vm_bytes: int, cpu_used_s: float = 0.0) -> dict[int, int]:
    """Per-job limits, set by the child itself before any submission code runs.

    The address-space limit is the interpreter's own size at fork time plus
    ``memory_mb``, so ``memory_mb`` is what the submission itself may allocate.
    The CPU limit counts from the CPU time the (pre-started) child has used so far.
    """
    return {
        resource.RLIMIT_AS: base_vm_bytes + limits.memory_mb * MiB,
        resource.RLIMIT_CPU: cpu_limit_s(cpu_used_s + limits.timeout_s),
    }


def apply_rlimits(plan: dict[int, int]) -> None:
    for res, value in plan.items():
        resource.setrlimit(res, (value, value))
