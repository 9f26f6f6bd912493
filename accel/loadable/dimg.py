"""DIMG images: the output goldens of NVDLA's loadable regression tests.

Layout (little-endian): ``b"DIMG"``, u32 version, then seven u32 metadata
fields {surface_format, width, height, channel, line_stride, surf_stride,
size}, then ``size`` bytes of surface data (36-byte header).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

_HEADER = struct.Struct("<4s8I")
MAGIC = b"DIMG"


@dataclass
class Dimg:
    surface_format: int
    width: int
    height: int
    channel: int
    line_stride: int
    surf_stride: int
    data: bytes
    version: int = 0

    def to_bytes(self) -> bytes:
        """Serialize (the inverse of :func:`read_dimg`)."""
        return _HEADER.pack(MAGIC, self.version, self.surface_format, self.width, self.height,
                            self.channel, self.line_stride, self.surf_stride,
                            len(self.data)) + self.data


def read_dimg(raw: bytes) -> Dimg:
    """Parse a DIMG file; ValueError names what is wrong."""
    if len(raw) < _HEADER.size:
        raise ValueError(f"DIMG needs a {_HEADER.size}-byte header, got {len(raw)} bytes")
    magic, version, fmt, w, h, c, ls, ss, size = _HEADER.unpack_from(raw)
    if magic != MAGIC:
        raise ValueError(f"not a DIMG file: magic {magic!r}, expected {MAGIC!r}")
    if len(raw) - _HEADER.size != size:
        raise ValueError(f"DIMG declares {size} data bytes but holds {len(raw) - _HEADER.size}")
    return Dimg(fmt, w, h, c, ls, ss, bytes(raw[_HEADER.size:]), version)
