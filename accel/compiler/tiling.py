"""CBUF tiling: cut a convolution into operations whose input and weights fit the CBUF.

The hardware (:mod:`accel.cbuf`) needs an operation's whole input resident in
its data banks, and at least one kernel group of weights in its weight banks
(the rest streams through).  A convolution that does not fit is cut into
*tiles*:

* **rows**: a tile computes output rows ``[oy0, oy1)`` from the input rows
  they need (windows overlap by ``(R - 1) * dilation + 1 - stride`` rows),
  with the convolution's top padding only on the first tile and its bottom
  padding only on the last;
* **kernels**: a tile computes output channels ``[k0, k1)`` with those
  kernels' weights, writing its own surfaces of the output (``k0`` is a
  multiple of the atom, so the slice starts a surface).

Weights that fit their banks completely stay in the CBUF from one row tile to
the next (``SKIP_WEIGHT_RLS`` then ``WEIGHT_REUSE``): they are fetched once
per kernel slice.  Weights that do not fit stream through one kernel group at
a time and are fetched again for every row tile.  Among the plans that fit,
the cheapest by an estimate of cycles wins: per operation the larger of MAC
atoms and DMA beats, plus :data:`OP_OVERHEAD` for programming and pipeline
fill, so equal work in fewer operations is preferred.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import lru_cache

from accel import cbuf
from accel.config import HwConfig
from accel.layout import ceil_div
from accel.regs import lookup

OP_OVERHEAD = 64   # cycles per operation: programming and pipeline fill (an estimate)
# an operation releases every input row it read from the CBUF (CSC D_RELEASE.RLS_SLICES + 1,
# a 12-bit field): at most 4096 rows per operation
MAX_ROWS = 1 << lookup("NVDLA_CSC.D_RELEASE").field("RLS_SLICES").width


@dataclass(frozen=True)
class ConvGeom:
    """A direct convolution: input C x H x W, K kernels of R x S, stride, pads, dilation."""

    c: int
    h: int
    w: int
    k: int
    r: int
    s: int
    stride: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)    # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)

    @property
    def out_hw(self) -> tuple[int, int]:
        (sy, sx), (dy, dx) = self.stride, self.dilation
        t, left, b, right = self.pads
        return ((self.h + t + b - (self.r - 1) * dy - 1) // sy + 1,
                (self.w + left + right - (self.s - 1) * dx - 1) // sx + 1)

    @property
    def bytes_per_kernel(self) -> int:
        return self.c * self.r * self.s


@dataclass(frozen=True)
class Tile:
    """One operation of a tiled convolution."""

    out_rows: tuple[int, int]           # [oy0, oy1)
    kernels: tuple[int, int]            # [k0, k1)
    in_rows: tuple[int, int]            # input rows read [iy0, iy1)
    pad_top: int
    pad_bottom: int
    data_banks: int
    weight_banks: int
    entries_per_slice: int
    weight_reuse: bool = False
    skip_weight_release: bool = False


@dataclass(frozen=True)
class TilePlan:
    tiles: tuple[Tile, ...]
    cycles: int                          # the estimate that chose this plan
    weights_resident: bool


def _in_rows(g: ConvGeom, oy0: int, oy1: int) -> tuple[int, int, int, int]:
    """``(iy0, iy1, pad_top, pad_bottom)`` of output rows ``[oy0, oy1)``."""
    sy, dy = g.stride[0], g.dilation[0]
    lo = oy0 * sy - g.pads[0]
    hi = (oy1 - 1) * sy - g.pads[0] + (g.r - 1) * dy + 1
    return max(0, lo), min(g.h, hi), max(0, -lo), max(0, hi - g.h)


def _row_split(g: ConvGeom, cfg: HwConfig, data_banks: int) -> list[tuple[int, int]] | None:
    """Output-row ranges whose inputs each fit ``data_banks``, as even as possible: ``n``
    bands of ``oh // n`` rows, the first ``oh % n`` of them one row more, so that bands of
    one height follow each other (the cmodel computes a run of bands of one shape
    together)."""
    oh = g.out_hw[0]
    eps = cbuf.entries_per_slice(cfg, g.c, g.w)
    capacity = min(data_banks * cfg.cbuf_bank_depth, MAX_ROWS * eps)
    # the most output rows whose input rows (an upper bound: no clipping) fit
    sy, dy = g.stride[0], g.dilation[0]
    span = (g.r - 1) * dy + 1
    if span * eps > capacity and min(g.h, span) * eps > capacity:
        return None
    most = max(1, (capacity // eps - span) // sy + 1) if capacity // eps >= span else 1
    n = ceil_div(oh, min(most, oh))
    while True:
        q, more = divmod(oh, n)
        starts = [i * q + min(i, more) for i in range(n + 1)]
        bounds = list(itertools.pairwise(starts))
        fits = True
        for o0, o1 in bounds:
            iy0, iy1, _, _ = _in_rows(g, o0, o1)
            if iy1 <= iy0 or ceil_div(eps * (iy1 - iy0), cfg.cbuf_bank_depth) > data_banks \
                    or iy1 - iy0 > MAX_ROWS:
                fits = False
                break
        if fits:
            return bounds
        if n >= oh:
            return None
        n += 1


def _cost(cfg: HwConfig, g: ConvGeom, tiles: list[Tile]) -> int:
    total = 0
    atom = cfg.atom_size
    for t in tiles:
        rows = t.out_rows[1] - t.out_rows[0]
        kt = t.kernels[1] - t.kernels[0]
        atoms = rows * g.out_hw[1] * g.r * g.s * ceil_div(g.c, cfg.atomic_c) \
            * ceil_div(kt, cfg.atomic_k)
        dma = (t.in_rows[1] - t.in_rows[0]) * g.w * ceil_div(g.c, atom) * atom
        dma += rows * g.out_hw[1] * ceil_div(kt, atom) * atom
        if not t.weight_reuse:
            dma += cbuf.weight_bytes(kt, g.bytes_per_kernel)
        total += max(atoms, ceil_div(dma, cfg.dma_bytes_per_cycle)) + OP_OVERHEAD
    return total


def _tiles(g: ConvGeom, cfg: HwConfig, k_slices: list[tuple[int, int]], weight_banks: int,
           resident: bool) -> list[Tile] | None:
    data_banks = cfg.cbuf_bank_number - weight_banks
    if data_banks < 1:
        return None
    rows = _row_split(g, cfg, data_banks)
    if rows is None:
        return None
    eps = cbuf.entries_per_slice(cfg, g.c, g.w)
    # every tile gets the banks of the tallest: kept weights stay in their banks only while
    # DATA_BANK does not change (the hardware refetches them otherwise)
    banks = max(ceil_div(eps * (i1 - i0), cfg.cbuf_bank_depth)
                for i0, i1, _, _ in (_in_rows(g, o0, o1) for o0, o1 in rows))
    tiles = []
    for k0, k1 in k_slices:
        for i, (o0, o1) in enumerate(rows):
            iy0, iy1, pt, pb = _in_rows(g, o0, o1)
            keep = resident and i < len(rows) - 1
            tiles.append(Tile((o0, o1), (k0, k1), (iy0, iy1), pt, pb, banks, weight_banks,
                              eps, weight_reuse=resident and i > 0, skip_weight_release=keep))
    return tiles


def _slice_sizes(k: int, unit: int) -> list[int]:
    """Kernel-slice sizes worth trying: ``k`` cut in 2..16 even parts, and powers of two
    of the unit, all multiples of ``unit`` below ``k``."""
    sizes = {unit << i for i in range(16) if unit << i < k}
    sizes |= {-(-k // (n * unit)) * unit for n in range(2, 17)}
    return sorted(kt for kt in sizes if unit <= kt < k)


@lru_cache(maxsize=4096)
def plan_conv(g: ConvGeom, cfg: HwConfig) -> TilePlan | str:
    """The cheapest tiling of ``g`` on ``cfg``, or the reason none fits (memoized: the
    partitioner, the planner and the lowering ask for the same layers)."""
    bpk = g.bytes_per_kernel
    unit = math.lcm(cfg.atomic_k, cfg.atom_size)
    candidates: list[tuple[list[Tile], bool]] = []
    # every kernel at once: weights resident if they fit, else streamed
    full = [(0, g.k)]
    wb_all = cbuf.weight_banks_total(cfg, g.k, bpk)
    if wb_all < cfg.cbuf_bank_number:
        t = _tiles(g, cfg, full, wb_all, resident=True)
        if t:
            candidates.append((t, True))
    wb_min = cbuf.weight_banks_min(cfg, g.k, bpk)
    if wb_min < wb_all:
        t = _tiles(g, cfg, full, wb_min, resident=False)
        if t:
            candidates.append((t, False))
    # kernel slices with resident weights
    for kt in _slice_sizes(g.k, unit):
        wb = cbuf.weight_banks_total(cfg, kt, bpk)
        if wb >= cfg.cbuf_bank_number:
            break
        slices = [(k0, min(g.k, k0 + kt)) for k0 in range(0, g.k, kt)]
        t = _tiles(g, cfg, slices, wb, resident=True)
        if t:
            candidates.append((t, True))
    if not candidates:
        eps = cbuf.entries_per_slice(cfg, g.c, g.w)
        span = min(g.h, (g.r - 1) * g.dilation[0] + 1)
        return (f"one output row needs {span} input rows of {eps} CBUF entries and one kernel "
                f"group {wb_min} weight banks; {cfg.name}'s CBUF has {cfg.cbuf_bank_number} "
                f"banks of {cfg.cbuf_bank_depth} entries")
    scored = [(_cost(cfg, g, t), i, t, res) for i, (t, res) in enumerate(candidates)]
    cycles, _, tiles, resident = min(scored, key=lambda x: (x[0], x[1]))
    return TilePlan(tuple(tiles), cycles, resident)
