"""Wire formats and the constants every side of the sandbox shares.

Frames are length-prefixed (4-byte big-endian length). Payloads are UTF-8 JSON, except
requests from the judge to the sandboxed child, which are ``marshal`` data (see
encode_request): JSON is what every trusted process reads. Zygote <-> worker messages
are fixed-size structs (below). Nothing here imports another part of the sandbox.
"""
from __future__ import annotations

import json
import marshal
import os
import re
import struct

HEADER = struct.Struct(">I")

# --- the sandboxed child's side of its pipes ------------------------------------------
REQ_FD = 3   # judge -> child requests
REP_FD = 4   # child -> judge replies and events
SETUP_FAILED_CODE = 70        # exit status of a child whose (trusted) setup failed
SETUP_TIMEOUT_S = 30.0        # for starting a child; the job's own time limit starts when it is ready
SUBMISSION_FILE = "<submission>"
PROGRAM_FILE = "<program>"

# --- zygote <-> worker: per-job structs (the zygote's own work between forks stays tiny) ---
SPAWN = struct.Struct("<ci")      # b"s", pid to reap first (0: none)   + 4 fds: out_w, err_w, req_r, rep_w
SPAWNED = struct.Struct("<cii")   # b"p", pid, job number (scratch dir j<N>)
REAP = struct.Struct("<ci")       # b"r", pid
REAPED = struct.Struct("<cidqq")  # b"R", wait status, cpu seconds, maxrss KiB, minor faults
# errors: b"e" + utf-8 text


def exc_record(type_: str, message: str, errno: int | None = None, line: str | None = None,
               lineno: int | None = None) -> dict:
    """The child's report of an exception (the judge cleans it again, see remote.clean_info)."""
    return {"type": type_, "message": message, "errno": errno, "line": line, "lineno": lineno}


def error_reply(type_: str, message: str, **extra) -> dict:
    """A failed reply from the child: ``{"ok": False, "exc": <exc_record>}``."""
    return {"ok": False, "exc": exc_record(type_, message), **extra}


class ProtocolError(Exception):
    pass


class TooLarge(ProtocolError):
    """The child's replies exceed what the judge accepts (bytes, or JSON values, per job)."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=True, check_circular=False)
try:  # the C encoder, built once (json.dumps with options builds one per call)
    from json.encoder import c_make_encoder, encode_basestring
    _C_ENCODE = c_make_encoder(None, _ENCODER.default, encode_basestring, None, ":", ",", False, False, True)
except Exception:  # pragma: no cover - pure-Python json
    _C_ENCODE = None


def dumps(obj) -> str:
    if _C_ENCODE is not None:
        return "".join(_C_ENCODE(obj, 0))
    return _ENCODER.encode(obj)


def encode_frame(obj) -> bytes:
    data = dumps(obj).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(data)) + data


def encode_request(obj) -> bytes:
    """A judge -> child frame: the payload is ``marshal`` data, not JSON.

    Only the sandboxed child decodes these (marshal.loads is far cheaper there than the JSON
    decoder, in time and in copy-on-write faults, and a marshalled code object or bytes ride
    along as they are). Frames from the child are always JSON: marshal must never read
    untrusted data.
    """
    data = marshal.dumps(obj)
    return HEADER.pack(len(data)) + data


# The JSON scanner itself (the C one when available), without json.loads' Python-level
# wrapping (whitespace regexes, BOM check): our frames hold exactly one JSON value.
_scan_once = json.decoder.JSONDecoder().scan_once


def decode_payload(data: bytes):
    try:
        text = data.decode("utf-8", "surrogatepass")
        obj, end = _scan_once(text, 0)
    except StopIteration:
        raise ProtocolError("malformed frame: JSONDecodeError") from None
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed frame: {type(e).__name__}") from None
    if end != len(text):
        raise ProtocolError("malformed frame: trailing data")
    return obj


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def _structure(data: bytes) -> int:
    return len(data) - len(data.translate(None, b"[{,:"))   # how many of those characters


def json_values_bound(data: bytes, enough: int) -> int:
    """An upper bound on the number of JSON values in ``data`` (one per value, so a bound on
    the objects the JSON decoder would build), computed without decoding it.

    Every value but the first follows a ``[``, ``{``, ``,`` or ``:``. The quick count also
    counts those characters inside strings; only when it exceeds ``enough`` are the strings
    taken out and the count redone.
    """
    quick = 1 + _structure(data)
    if quick <= enough:
        return quick
    return 1 + _structure(_JSON_STRING.sub(b'""', data))


def write_all(fd: int, data: bytes) -> None:
    """Blocking write of all of ``data``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def write_frame(fd: int, obj) -> None:
    """Blocking write of one frame."""
    write_all(fd, encode_frame(obj))


def read_exact(fd: int, n: int) -> bytes | None:
    """Blocking read of exactly ``n`` bytes; None at EOF."""
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def read_frame(fd: int, max_bytes: int = 1 << 30):
    """Blocking read of one frame; None on EOF."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if n > max_bytes:
        raise ProtocolError(f"frame of {n} bytes exceeds the {max_bytes}-byte limit")
    data = read_exact(fd, n)
    if data is None:
        return None
    return decode_payload(data)


_INCOMPLETE = object()


class FrameBuffer:
    """Incremental frame parser for non-blocking reads.

    ``max_bytes`` bounds every frame. With ``total_bytes`` / ``total_values`` the buffer also
    bounds everything it ever decodes (the frames' bytes, and the JSON values in them): the
    judge reads a sandboxed child's replies through one of these per job, so that no reply,
    nor all of a job's replies together, can make the trusted side build more than that.
    """

    def __init__(self, max_bytes: int, total_bytes: int | None = None, total_values: int | None = None):
        self.max_bytes = max_bytes
        self.total_bytes, self.total_values = total_bytes, total_values
        self.bytes_left = total_bytes
        self.values_left = total_values
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def pop(self):
        """Next complete frame, or raise LookupError when none is complete yet."""
        f = self.pop_or(_INCOMPLETE)
        if f is _INCOMPLETE:
            raise LookupError
        return f

    def pop_or(self, default):
        """Next complete frame, or ``default`` when none is complete yet."""
        buf = self._buf
        if len(buf) < 4:
            return default
        (n,) = HEADER.unpack_from(buf)
        if n > self.max_bytes:
            raise TooLarge(f"a reply of {n} bytes (the limit is {self.max_bytes})")
        if self.bytes_left is not None and n > self.bytes_left:
            raise TooLarge(f"replies of more than {self.total_bytes} bytes in all")
        if len(buf) < 4 + n:
            return default
        data = bytes(buf[4:4 + n])
        del buf[:4 + n]
        if self.bytes_left is not None:
            self.bytes_left -= n
        if self.values_left is not None:
            count = 1 + n - len(data.translate(None, b"[{,:"))   # json_values_bound's quick count
            if count > self.values_left:
                count = json_values_bound(data, self.values_left)
            if count > self.values_left:
                raise TooLarge(f"replies holding more than {self.total_values} values in all")
            self.values_left -= count
        return decode_payload(data)

    def pending(self) -> int:
        return len(self._buf)
