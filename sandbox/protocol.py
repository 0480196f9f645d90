"""Length-prefixed frames over pipes (4-byte big-endian length).

Payloads are UTF-8 JSON, except requests from the judge to the sandboxed child, which are
``marshal`` data (see encode_request): JSON is what every trusted process reads.
"""
from __future__ import annotations

import json
import marshal
import os
import struct

HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    pass


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


def write_frame(fd: int, obj) -> None:
    """Blocking write of one frame."""
    buf = memoryview(encode_frame(obj))
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
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
    head = _read_exact(fd, HEADER.size)
    if head is None:
        return None
    (n,) = HEADER.unpack(head)
    if n > max_bytes:
        raise ProtocolError(f"frame of {n} bytes exceeds the {max_bytes}-byte limit")
    data = _read_exact(fd, n)
    if data is None:
        return None
    return decode_payload(data)


_INCOMPLETE = object()


class FrameBuffer:
    """Incremental frame parser for non-blocking reads."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
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
            raise ProtocolError(f"frame of {n} bytes exceeds the {self.max_bytes}-byte limit")
        if len(buf) < 4 + n:
            return default
        data = bytes(buf[4:4 + n])
        del buf[:4 + n]
        return decode_payload(data)

    def pending(self) -> int:
        return len(self._buf)
