"""Modules imported in the warm worker before any fork.

The submission runs as an unprivileged uid inside a chroot, where the
interpreter's own files (often under a 0700 home such as /root/.pyenv) cannot
be read, so it can only use modules that are already loaded. Anything else is
refused with a clear ImportError (see harness.install_import_guard).
"""
from __future__ import annotations

import importlib

STDLIB = (
    "abc", "array", "ast", "base64", "binascii", "bisect", "builtins", "calendar", "cmath",
    "codecs", "collections", "collections.abc", "contextlib", "copy", "csv", "dataclasses",
    "datetime", "decimal", "difflib", "enum", "errno", "fnmatch", "fractions", "functools",
    "gc", "hashlib", "heapq", "hmac", "inspect", "io", "itertools", "json", "keyword",
    "linecache", "locale", "math", "numbers", "operator", "os", "os.path", "pprint", "queue",
    "random", "re", "resource", "secrets", "signal", "socket", "statistics", "string", "struct",
    "subprocess", "sys", "textwrap", "threading", "time", "traceback", "types", "typing",
    "unicodedata", "uuid", "warnings", "weakref", "zlib", "_strptime", "shutil", "tempfile",
    "glob", "pathlib",
    "sre_compile", "sre_parse", "sre_constants",
    # codecs looked up lazily by str.encode/bytes.decode/codecs.decode
    "encodings.ascii", "encodings.latin_1", "encodings.utf_8", "encodings.utf_16",
    "encodings.utf_32", "encodings.cp1252", "encodings.hex_codec", "encodings.base64_codec",
    "encodings.rot_13", "encodings.idna", "encodings.unicode_escape", "encodings.raw_unicode_escape",
)


def preload(extra: tuple[str, ...] = ()) -> list[str]:
    """Import the preload set; return the names that could not be imported."""
    missing = []
    for name in STDLIB + tuple(extra):
        try:
            importlib.import_module(name)
        except Exception:
            missing.append(name)
    # Warm lazily-initialised state used by common calls.
    try:
        import datetime
        import time
        datetime.datetime.strptime("2000-01-01", "%Y-%m-%d")
        time.strftime("%Y")
        "x".encode("idna")
    except Exception:
        pass
    return missing
