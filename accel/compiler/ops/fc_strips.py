"""A fully-connected layer over a cube wider or taller than a kernel: strips into channels.

NVDLA runs ``Gemm`` as a convolution whose kernel is the whole input cube
(:mod:`accel.compiler.ops.conv`), but a kernel is at most 32 x 32
(``WEIGHT_WIDTH_EXT`` / ``WEIGHT_HEIGHT_EXT``: 5 bits).  A dot product does not
care where its terms sit, so a ``C x H x W`` cube with ``H`` or ``W`` above 32 is
re-laid: cut into ``ny x nx`` strips of ``r x s`` pixels (``r, s <= 32``), each
strip copied (an SDP pass-through, the int8 codes unchanged) into its own slot
of channels of a ``(n * C') x r x s`` temporary, and the weights re-laid alike.
One convolution then sums every product in the CACC, as the plain kernel would:
the result is the plain Gemm's bit for bit, so the op table's int8 reference of
the plain Gemm stays the golden.

Worked example, nv_small (atom 8): a 8 x 2 x 64 cube is 2 strips of 2 x 32; the
temporary is 16 x 2 x 32, strip ``j`` in channels ``[8j, 8j + 8)``, and weight
``[k, c, y, x]`` moves to ``[k, 8 * (x // 32) + c, y, x % 32]``.

* Slots start on atoms, as a channel view must
  (:meth:`accel.compiler.tensors.Region.channels`): ``C'`` is ``C`` rounded up
  to the atom.  The lanes between ``C`` and ``C'`` hold what the copy's whole
  atoms carry; their weights are zero.
* Strips are as equal as the size allows (``ceil(H / ny)`` rows); where they do
  not divide it, the last strip ends at the border and overlaps the one before,
  and a pixel's weight goes to the first strip holding it (zero in the other), so
  no strip reads outside the cube.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from accel.compiler.tiling import ConvGeom
from accel.layout import align_up, ceil_div


def _cuts(size: int, limit: int) -> tuple[int, tuple[tuple[int, int, int], ...]]:
    """Strip length and ``(start, first owned, end owned)`` of each strip of ``size``."""
    n = ceil_div(size, limit)
    length = ceil_div(size, n)
    return length, tuple((min(i * length, size - length), i * length,
                          min((i + 1) * length, size)) for i in range(n))


@dataclass(frozen=True)
class Strips:
    """A ``c x h x w`` cube as strips of ``r x s`` pixels in channel slots of ``slot``."""

    c: int
    h: int
    w: int
    r: int
    s: int
    slot: int                                     # channels per strip: c up to the atom
    rows: tuple[tuple[int, int, int], ...]        # (start, first owned, end owned)
    cols: tuple[tuple[int, int, int], ...]

    @property
    def count(self) -> int:
        return len(self.rows) * len(self.cols)

    @property
    def channels(self) -> int:
        """Channels of the re-laid cube (the last slot holds only ``c``)."""
        return (self.count - 1) * self.slot + self.c

    def pieces(self):
        """``(slot index, rows (start, lo, hi), columns (start, lo, hi))``, row strips first."""
        for i, ry in enumerate(self.rows):
            for j, cx in enumerate(self.cols):
                yield i * len(self.cols) + j, ry, cx

    def geom(self, k: int) -> ConvGeom:
        """The convolution the Gemm of ``k`` outputs is on the re-laid cube."""
        return ConvGeom(self.channels, self.r, self.s, k, self.r, self.s)

    def weights(self, w: np.ndarray) -> np.ndarray:
        """``w`` [K, c, h, w] re-laid to [K, channels, r, s] (zeros where no pixel is)."""
        out = np.zeros((w.shape[0], self.channels, self.r, self.s), dtype=w.dtype)
        for n, (y0, ylo, yhi), (x0, xlo, xhi) in self.pieces():
            out[:, n * self.slot:n * self.slot + self.c, ylo - y0:yhi - y0, xlo - x0:xhi - x0] = \
                w[:, :, ylo:yhi, xlo:xhi]
        return out

    def relay(self, lo, node, src):
        """Emit the copies of ``src`` (the cube's region) into a new temporary; returns it."""
        cube = lo.temp(lo.label(node, "strips"), self.channels, self.r, self.s)
        for n, (y0, _, _), (x0, _, _) in self.pieces():
            lo.copy(node, src.rows(y0, self.r).cols(x0, self.s),
                    cube.channels(n * self.slot, self.c), f"strip{n}")
        return cube


def strips(cube: tuple[int, int, int], limit: int, atom: int) -> Strips | None:
    """The strips of ``cube`` (C, H, W) for kernels of at most ``limit`` pixels a side, or
    None when the cube fits one kernel as it is."""
    c, h, w = cube
    if h <= limit and w <= limit:
        return None
    r, rows = _cuts(h, limit)
    s, cols = _cuts(w, limit)
    return Strips(c, h, w, r, s, align_up(c, atom), rows, cols)
