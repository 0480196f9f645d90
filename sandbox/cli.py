"""Command line: ``python -m sandbox check ...`` / ``python -m sandbox run ...``.

Prints one verdict (``--json``: a JSON object). Exit status 0 whenever the
submission ran, whatever the verdict; 2 for bad input (named in the message).
"""
from __future__ import annotations

import argparse
import json
import sys

from .config import JOB_LIMITS, SandboxConfig
from .pool import SandboxPool


class BadInput(Exception):
    pass


def _read(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise BadInput(f"{what}: file not found: {path}") from None
    except IsADirectoryError:
        raise BadInput(f"{what}: is a directory, not a file: {path}") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{what}: not UTF-8 text: {path} ({e.reason})") from None
    except OSError as e:
        raise BadInput(f"{what}: cannot read {path}: {e.strerror}") from None


def _positive(kind):
    def conv(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"must be > 0: {s!r}")
        return v
    return conv


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sandbox", description="Run untrusted Python in the CAPA sandbox.")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check", help="run a HumanEval-style test (check(candidate)) against a submission")
    c.add_argument("--code", required=True, help="file with the submission's code")
    c.add_argument("--test", required=True, help="file defining check(candidate)")
    c.add_argument("--entry-point", required=True, help="the task's name for the function under test")
    c.add_argument("--candidate", help="the submission's function the test receives as candidate, when it is "
                                       "not named like the entry point (default: the entry point)")
    c.add_argument("--prelude", help="optional trusted helper source the test may use (e.g. the task prompt)")
    r = sub.add_parser("run", help="run a whole program; passed if it exits with status 0")
    r.add_argument("program", help="the program file")
    for sp in (c, r):
        sp.add_argument("--timeout", type=_positive(float), default=JOB_LIMITS.timeout_s,
                        help=f"seconds (default {JOB_LIMITS.timeout_s:g})")
        sp.add_argument("--memory-mb", type=_positive(int), default=JOB_LIMITS.memory_mb,
                        help=f"MiB (default {JOB_LIMITS.memory_mb})")
        sp.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.cmd == "check":
            if not args.entry_point.strip():
                raise BadInput("--entry-point: must not be empty")
            if not args.entry_point.isidentifier():
                raise BadInput(f"--entry-point: not a Python identifier: {args.entry_point!r}")
            if args.candidate is not None and not args.candidate.isidentifier():
                raise BadInput(f"--candidate: not a Python identifier: {args.candidate!r}")
            code = _read(args.code, "--code")
            test = _read(args.test, "--test")
            prelude = _read(args.prelude, "--prelude") if args.prelude else None
        else:
            program = _read(args.program, "program")
    except BadInput as e:
        print(f"python -m sandbox {args.cmd}: error: {e}", file=sys.stderr)
        return 2
    with SandboxPool(workers=1, config=SandboxConfig()) as pool:
        if args.cmd == "check":
            v = pool.check(code, test, args.entry_point, args.timeout, args.memory_mb, prelude,
                           candidate=args.candidate)
        else:
            v = pool.run(program, args.timeout, args.memory_mb)
    # Whatever the verdict holds (text from the submission included), printing it must not
    # fail: undecodable characters are escaped rather than raising on a strict stdout.
    try:
        sys.stdout.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError):
        pass
    print(format_verdict(v, args.json))
    return 0


def format_verdict(v, as_json: bool) -> str:
    if as_json:
        return json.dumps(v.to_dict())
    lines = [f"status: {v.status}"]
    if v.failure:
        lines.append(f"failure: {v.failure.type}: {v.failure.message}")
        if v.failure.line:
            lines.append(f"line: {v.failure.line}")
    lines.append(f"wall: {v.wall_s:.3f} s")
    lines += [f"note: {n}" for n in v.notes]
    if v.stdout:
        lines.append("--- stdout ---\n" + v.stdout.rstrip("\n"))
    if v.stderr:
        lines.append("--- stderr ---\n" + v.stderr.rstrip("\n"))
    return "\n".join(lines)
