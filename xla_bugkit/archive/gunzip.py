"""A tar.gz's tar stream, decompressed forward only, with what may follow the gzip data capped.

``gzip.GzipFile`` serves a seek backwards by decompressing everything again from the start
(tarfile's end-of-archive check seeks back one block), skips forward in 8 KiB steps, and
skips zero padding after the compressed data one byte per call, with no end: 20 MB of
zeros appended to a 1 KB bundle cost it 6 s. Here the last records read are kept for the
seek back, skips run in large steps, and padding past ``MAX_PADDING`` is refused.
"""

from __future__ import annotations

import gzip
import zlib
from typing import BinaryIO

from xla_bugkit.archive.members import CHUNK

MAX_PADDING = 1 << 20  # zeros after the compressed data (gzip allows some; tools write none)
_MAGIC = b"\x1f\x8b"
_RAW_CHUNK = 1 << 16
_KEPT = 10240  # one tar record: tarfile and the end check seek back at most one block
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib parses the gzip header and checks its CRC and size


class GunzipStream:
    """The decompressed bytes of the gzip file ``raw``: read, tell, and seek forward (or back
    into the last record read), as tarfile needs. Bad data raises ``gzip.BadGzipFile``,
    ``zlib.error`` or ``EOFError``, which ``read.open_archive`` words."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._input = b""  # compressed bytes read from raw and not yet decompressed
        self._member: zlib._Decompress | None = None
        self._ended = False
        self._padding = 0
        self._pos = 0  # where the next read starts
        self._end = 0  # how much has been decompressed
        self._kept = b""  # the last bytes decompressed, ending at _end

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0 or pos < self._end - len(self._kept):
            raise OSError("a compressed tar is read forward only")
        self._pos = pos
        return pos

    def read(self, size: int = -1) -> bytes:
        while self._end < self._pos and self._decompress(min(self._pos - self._end, CHUNK)):
            pass  # a skip forward: decompressed and dropped
        parts: list[bytes] = []
        if self._pos < self._end:
            kept = self._kept[len(self._kept) - (self._end - self._pos) :]
            parts.append(kept if size < 0 else kept[:size])
        got = len(parts[0]) if parts else 0
        while size < 0 or got < size:
            data = self._decompress(CHUNK if size < 0 else min(size - got, CHUNK))
            if not data:
                break
            parts.append(data)
            got += len(data)
        self._pos += got
        return b"".join(parts)

    def _decompress(self, limit: int) -> bytes:
        """Up to ``limit`` more bytes, b"" at the end of the last gzip member."""
        while not self._ended:
            if self._member is None:
                self._start_member()
                continue
            fed = self._input or self._raw.read(_RAW_CHUNK)
            try:
                data = self._member.decompress(fed, limit)
            except zlib.error as e:
                if "incorrect data check" in str(e) or "incorrect length check" in str(e):
                    raise gzip.BadGzipFile("CRC check failed") from None
                raise
            self._input = self._member.unconsumed_tail or self._member.unused_data
            if self._member.eof:
                self._member = None
            elif not fed and not data:
                raise EOFError("the gzip stream ends before its end marker")
            if data:
                self._end += len(data)
                self._kept = (self._kept[-_KEPT:] + data[-_KEPT:])[-_KEPT:]
                return data
        return b""

    def _start_member(self) -> None:
        """The next gzip member, after any zero padding; or the end of the file."""
        while True:
            stripped = self._input.lstrip(b"\x00")
            self._padding += len(self._input) - len(stripped)
            if self._padding > MAX_PADDING:
                raise gzip.BadGzipFile(f"over {MAX_PADDING} bytes of padding after the data")
            self._input = stripped
            if len(stripped) >= len(_MAGIC):
                break
            more = self._raw.read(_RAW_CHUNK)
            if not more:
                break
            self._input += more
        if not self._input:
            self._ended = True
        elif self._input.startswith(_MAGIC):
            self._member = zlib.decompressobj(_GZIP_WBITS)
        else:
            raise gzip.BadGzipFile("data after the end of the compressed stream")
