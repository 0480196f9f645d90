"""How many CPUs this process may use: the default thread count of the llama.cpp engine and of
the llama.cpp server (whose own default is half the cores)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover (not Linux)
        return max(1, os.cpu_count() or 1)
