"""CAPA sandbox: run model-written Python against hidden tests and return a structured verdict.

    from sandbox import check, run, Verdict, SandboxPool, CheckJob

This package knows nothing about LLMs and imports nothing from the rest of CAPA.
See sandbox/README.md for the threat model.
"""
from .config import SandboxConfig
from .pool import CheckJob, SandboxPool, check, default_pool, run
from .verdict import STATUSES, Failure, Verdict

__all__ = ["check", "run", "Verdict", "Failure", "SandboxPool", "CheckJob", "SandboxConfig", "STATUSES",
           "default_pool"]
