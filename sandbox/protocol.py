"""Length-prefixed JSON frames over pipes (4-byte big-endian length, UTF-8 JSON)."""
from __future__ import annotations

import json
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


def encode_blob_frame(obj: dict, *blobs: bytes) -> bytes:
    """A judge -> child frame carrying raw bytes next to a small JSON header.

    Payload: b"\\0", 4-byte JSON length, the JSON (with ``"_blobs"``: the blob lengths),
    then the blobs back to back. Spares the child decoding large JSON/base64 strings
    (only the child reads these; frames from the child are always plain JSON).
    """
    head = dumps(dict(obj, _blobs=[len(b) for b in blobs])).encode("utf-8", "surrogatepass")
    payload = b"".join((b"\0", HEADER.pack(len(head)), head) + blobs)
    return HEADER.pack(len(payload)) + payload


def decode_request(data: bytes):
    """Decode a judge -> child frame: plain JSON, or a blob frame (blobs as memoryviews)."""
    if data[:1] != b"\0":
        return decode_payload(data)
    (n,) = HEADER.unpack_from(data, 1)
    obj = decode_payload(data[5:5 + n])
    view = memoryview(data)
    pos = 5 + n
    blobs = []
    for size in obj.pop("_blobs"):
        blobs.append(view[pos:pos + size])
        pos += size
    obj["_blobs"] = blobs
    return obj


def decode_payload(data: bytes):
    try:
        return json.loads(data.decode("utf-8", "surrogatepass"))
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ProtocolError(f"malformed frame: {type(e).__name__}") from None


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


def read_frame(fd: int, max_bytes: int = 1 << 30, decode=decode_payload):
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
    return decode(data)


class FrameBuffer:
    """Incremental frame parser for non-blocking reads."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data

    def pop(self):
        """Next complete frame, or raise LookupError when none is complete yet."""
        if len(self._buf) < HEADER.size:
            raise LookupError
        (n,) = HEADER.unpack_from(self._buf)
        if n > self.max_bytes:
            raise ProtocolError(f"frame of {n} bytes exceeds the {self.max_bytes}-byte limit")
        if len(self._buf) < HEADER.size + n:
            raise LookupError
        data = bytes(self._buf[HEADER.size:HEADER.size + n])
        del self._buf[:HEADER.size + n]
        return decode_payload(data)

    def pending(self) -> int:
        return len(self._buf)
