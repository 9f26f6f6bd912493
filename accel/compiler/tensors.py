"""Where DLA tensors live: buffers and the cube regions ops read and write.

A :class:`Region` is a feature cube at a byte offset inside a named buffer,
with the buffer's line and surface strides (:class:`accel.layout.CubeLayout`).
Views are regions too: a channel slice of a concat buffer starts at a surface
boundary, a row slice at a line, a column slice at an atom.  Every DMA of
NVDLA addresses a cube by (start address, line stride, surface stride), so an
op reads or writes any view directly; this is how concatenation, slicing and
strided (upsampling) writes cost no copies.

>>> from accel.config import get_preset
>>> from accel.layout import cube_layout
>>> cfg = get_preset("nv_small")
>>> whole = Region("cat", 0, cube_layout(cfg, 24, 4, 4))
>>> part = whole.channels(8, 16)
>>> part.offset, part.layout.channels, part.layout.surf_stride
(128, 16, 128)
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accel.errors import AccelError
from accel.layout import CubeLayout, ceil_div


class RegionError(AccelError, ValueError):
    """A view the hardware cannot address (the message says why)."""


@dataclass(frozen=True)
class Region:
    """A cube of ``layout`` at ``offset`` bytes into buffer ``buffer``."""

    buffer: str
    offset: int
    layout: CubeLayout

    @property
    def shape(self) -> tuple[int, int, int]:
        lay = self.layout
        return lay.channels, lay.height, lay.width

    @property
    def end(self) -> int:
        """One past the last byte the cube spans (padded lanes included)."""
        return self.offset + self.layout.size

    @property
    def packed_lines(self) -> bool:
        """Lines follow each other without gaps (a surface is one run of atoms)."""
        return self.layout.line_stride == self.layout.width * self.layout.atom_bytes

    def channels(self, c0: int, n: int) -> Region:
        """Channels ``[c0, c0 + n)``; ``c0`` must start a surface (a multiple of the atom)."""
        lay = self.layout
        if c0 % lay.atom:
            raise RegionError(f"channel {c0} does not start an atom of {lay.atom} channels")
        if not (0 <= c0 and n >= 1 and c0 + n <= ceil_div(lay.channels, lay.atom) * lay.atom):
            raise RegionError(f"channels [{c0}, {c0 + n}) outside a {lay.channels}-channel cube")
        return Region(self.buffer, self.offset + (c0 // lay.atom) * lay.surf_stride,
                      replace(lay, channels=n))

    def rows(self, y0: int, n: int) -> Region:
        """Rows ``[y0, y0 + n)`` of every surface."""
        lay = self.layout
        if not (0 <= y0 and n >= 1 and y0 + n <= lay.height):
            raise RegionError(f"rows [{y0}, {y0 + n}) outside a cube of height {lay.height}")
        return Region(self.buffer, self.offset + y0 * lay.line_stride, replace(lay, height=n))

    def cols(self, x0: int, n: int) -> Region:
        """Columns ``[x0, x0 + n)`` of every line."""
        lay = self.layout
        if not (0 <= x0 and n >= 1 and x0 + n <= lay.width):
            raise RegionError(f"columns [{x0}, {x0 + n}) outside a cube of width {lay.width}")
        return Region(self.buffer, self.offset + x0 * lay.atom_bytes, replace(lay, width=n))

    def column(self) -> Region:
        """The cube seen as one column of ``H * W`` pixels (width 1, one line per pixel).

        Pixel ``(y, x)`` becomes row ``y * W + x``; this needs packed lines.
        """
        lay = self.layout
        if not self.packed_lines:
            raise RegionError(f"a column view needs packed lines (line stride "
                              f"{lay.line_stride} != {lay.width} x {lay.atom_bytes})")
        return Region(self.buffer, self.offset,
                      replace(lay, height=lay.height * lay.width, width=1,
                              line_stride=lay.atom_bytes))

    def surfaces_as_line(self) -> Region:
        """A ``C x 1 x 1`` cube whose surfaces follow each other seen as one line of
        ``ceil(C / atom)`` pixels of ``atom`` channels: the same bytes, channel ``c`` at
        pixel ``c // atom``, lane ``c % atom``."""
        lay = self.layout
        if (lay.height, lay.width) != (1, 1) or lay.surf_stride != lay.atom_bytes:
            raise RegionError(f"a line view needs a {lay.channels}x1x1 cube with surfaces "
                              f"back to back (surface stride {lay.surf_stride} != "
                              f"{lay.atom_bytes})")
        n = lay.surfaces
        return Region(self.buffer, self.offset,
                      replace(lay, channels=lay.atom, width=n, line_stride=n * lay.atom_bytes,
                              surf_stride=n * lay.atom_bytes))

    def strided(self, offset: int, line_stride: int, height: int | None = None,
                width: int | None = None) -> Region:
        """Same channels and surface stride, another start, line stride and size."""
        lay = self.layout
        return Region(self.buffer, self.offset + offset,
                      replace(lay, line_stride=line_stride,
                              height=lay.height if height is None else height,
                              width=lay.width if width is None else width))

    def overlaps(self, other: Region) -> bool:
        """Conservative: the byte spans intersect (same buffer)."""
        return self.buffer == other.buffer and self.offset < other.end \
            and other.offset < self.end
