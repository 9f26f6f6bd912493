"""CDP + CDP_RDMA: cross-channel data processor (local response normalisation), int8.

The int8 datapath of NVDLA's cmod (hw@master ``NV_NVDLA_cdp.cpp``
``CdpDataPathSequence`` / ``lookup_lut_int8``, HLS ``cdp_icvt`` /
``cdp_ocvt``), per element ``x[c, h, w]`` of the cube CDP_RDMA fetches:

1. **channel padding**: lanes past ``C`` in the last atom, and the 4
   channels before the first / after the last atom, read as
   ``int8(DATIN_OFFSET)`` (the low byte of the 16-bit register).
2. **input converter**: ``v = sat9(round((x - int8(DATIN_OFFSET)) * DATIN_SCALE
   / 2**DATIN_SHIFTER))`` (round half away from zero).
3. **square sum** over ``2n+1`` channels centred on ``c`` (``NORMALZ_LEN`` n =
   1..4 for local sizes 3/5/7/9), exact integers; ``SQSUM_BYPASS`` passes
   ``v`` instead.
4. **LUT** on the sum (:func:`accel.cmod.lut.lookup_int`) -> int16 ``L``.
5. **multiply**: ``L * v`` (25 bits); ``MUL_BYPASS`` passes ``L``.
6. **output converter**: ``sat8(round((y - sext25(DATOUT_OFFSET)) * DATOUT_SCALE
   / 2**DATOUT_SHIFTER))``; saturations are counted in ``D_OUT_SATURATION``
   (a result more than 1 away from the floor shift, as the HLS flags it).

The write DMA stores whole atoms with the destination strides, so the padded
lanes of the last surface are written with what the datapath computed for them.

With SQSUM_BYPASS every step depends on the lane's own int8 value alone, so the
datapath is a function of 256 codes: ``run(..., per_code=True)`` (the speed
layer's choice) computes it once per code (:func:`code_table`) and indexes the
result, counting each code's LUT hits and saturations as often as lanes hold it -
the same bytes and counters as lane by lane.  The table depends on the registers
and the LUT's entries alone, so the speed layer keeps it between operations
(``tables``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from accel.arith import saturate, shift_round, sign_extend
from accel.cmod.csb import GroupView
from accel.cmod.cube import padded_channels, read_int8_raw, write_int8_cube, write_packed_cube
from accel.cmod.dram import Dram
from accel.cmod.errors import UnsupportedError
from accel.cmod.fast.code_tables import NO_FLAGS, ByteTable, table_apply
from accel.cmod.lut import (
    CLASSES,
    LUT_COUNTERS,
    LutRam,
    hit_counts,
    lookup_classes,
    lut_config,
)
from accel.cmod.perf import cdp_cycles
from accel.cmod.records import OpRecord
from accel.config import HwConfig
from accel.jit import njit

UNIT = "CDP"
HALO = 4  # channels of context on each side: (9 - 1) / 2


def input_cvt(x: np.ndarray, offset: int, scale: int, shift: int) -> np.ndarray:
    """9-bit converted lanes; ``offset`` is already the int8 the hardware uses."""
    return saturate(shift_round((x - offset) * scale, shift), 9)


def square_sum(v: np.ndarray, n: int, channels: int) -> np.ndarray:
    """Sums of squares over ``2n+1`` neighbours for ``channels`` centres of ``v[HALO:]``."""
    sq = v * v
    out = np.zeros((channels,) + v.shape[1:], dtype=np.int64)
    for j in range(-n, n + 1):  # at most 9 vectorized adds
        out += sq[HALO + j:HALO + j + channels]
    return out


def output_cvt(y: np.ndarray, offset: int, scale: int, shift: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(int8 values, saturation mask)`` of the output converter."""
    prod = (y - offset) * scale
    shift = min(shift, 62)  # |prod| < 2**42: any larger shift also gives 0
    out = saturate(shift_round(prod, shift), 8)
    floor = np.right_shift(prod, shift)
    return out, np.abs(floor - out) > 1


def _datapath(g: GroupView, ram: LutRam, x: np.ndarray, c_pad: int | None
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(int8 out, saturation mask, LUT hit classes)`` of steps 2-6 on ``x``: the
    channel cube with its halo (``c_pad`` channels between the halos), or with
    SQSUM_BYPASS any array of values (``c_pad`` None)."""
    v = input_cvt(x, int(sign_extend(g("D_DATIN_OFFSET") & 0xFF, 8)),
                  int(sign_extend(g("D_DATIN_SCALE"), 16)), g("D_DATIN_SHIFTER"))
    centre = v if c_pad is None else v[HALO:HALO + c_pad]
    if g("D_FUNC_BYPASS", "SQSUM_BYPASS"):
        s = centre
    else:
        s = square_sum(v, g("D_LRN_CFG", "NORMALZ_LEN") + 1, c_pad)
    lut, cls = lookup_classes(s, ram, lut_config(g))
    y = lut if g("D_FUNC_BYPASS", "MUL_BYPASS") else lut * centre
    out, sat = output_cvt(y, int(sign_extend(g("D_DATOUT_OFFSET"), 25)),
                          int(sign_extend(g("D_DATOUT_SCALE"), 16)), g("D_DATOUT_SHIFTER"))
    return out, sat, cls


class CodeTable(NamedTuple):
    """The SQSUM-bypassed datapath on every int8 code, ``-128..127`` at ``[0..255]``."""

    out: np.ndarray          # int8 result
    #: int64 ``[len(CLASSES) + 1, 256]``: 1 where a code adds to each hit counter (in
    #: CLASSES' order), then where it saturates; times the codes' uses, the counters
    counters: np.ndarray
    #: the codes that add to the counters otherwise than most (at most :data:`RARE_CODES`,
    #: else None) and one of the most
    rare: np.ndarray | None
    common: int
    #: the results as a lookup by the raw byte (:func:`accel.cmod.fast.code_tables.table_apply`)
    by_byte: ByteTable


#: most codes :func:`_run_codes` counts apart, by comparing each lane with them, rather
#: than counting every code (the CDP as an exact table has one: -128, the LUT's underflow),
#: on cubes of whole atoms: 1.2-1.3x faster there, while on channels that leave lanes of
#: padding the count of every code, which fills those, is 1.5-3x faster (8-lane atoms,
#: 1 to 24 channels; measured 2026-12-06)
RARE_CODES = 4


def code_table(g: GroupView, ram: LutRam) -> CodeTable:
    """The datapath of the CDP group ``g`` with the LUT ``ram`` on all 256 codes."""
    out, sat, cls = _datapath(g, ram, np.arange(-128, 128, dtype=np.int64), None)
    counters = np.vstack([cls == k for k in range(len(CLASSES))] + [sat]).astype(np.int64)
    _, kind, many = np.unique(counters.T, axis=0, return_inverse=True, return_counts=True)
    kind = kind.reshape(-1)
    most = int(np.argmax(many))
    rare = np.flatnonzero(kind != most)
    out = out.astype(np.int8)
    by_byte = np.ascontiguousarray(out.view(np.uint8)[np.arange(256) ^ 0x80])
    return CodeTable(out, counters, rare if rare.size <= RARE_CODES else None,
                     int(np.flatnonzero(kind == most)[0]), ByteTable(by_byte, NO_FLAGS))


def _run_codes(dram: Dram, table: CodeTable, c: int, h: int, w: int, atom: int, in_off: int,
               src: tuple[int, int, int], dst: tuple[int, int, int]) -> np.ndarray | None:
    """Write the ``c x h x w`` cube at ``src`` (base, line and surface strides) through
    ``table`` at ``dst``, whole atoms as memory holds them (the padded lanes as the code
    ``in_off``); return how many lanes held each code (``[256]``, ``-128`` first; with
    the table's :attr:`~CodeTable.rare` codes, those apart and all the others as its
    :attr:`~CodeTable.common` code, which adds to the counters alike), or None when the
    source's atoms leave its region (the caller's read then names the address)."""
    surfaces = -(-c // atom)
    x = dram.strided(src[0], (surfaces, h, w, atom), (src[2], src[1], atom, 1), "CDP_RDMA")
    if x is None:
        return None
    uses = np.zeros(256, dtype=np.int64)
    pad_code = in_off + 128
    if table.rare is None or c % atom:
        out = np.empty(x.shape, dtype=np.int8)
        _codes_packed(x, table.out.view(np.uint8), c, pad_code, out.view(np.uint8), uses)
    else:       # whole atoms: a lookup by the byte, then the rare codes counted apart
        out, _ = table_apply(x, None, table.by_byte, c)
        for code in table.rare.tolist():
            uses[code] = np.count_nonzero(x == code ^ 0x80)
        uses[table.common] += x.size - uses.sum()
    write_packed_cube(dram, dst[0], out, dst[1], dst[2], "CDP_WDMA")
    return uses


@njit(cache=True, nogil=True)
def _codes_packed(x, table, c, pad_code, out, uses):
    """``out = table[code]`` per lane of ``x`` (uint8 ``[S, H, W, atom]``, channel-packed
    as memory holds it, any strides; a byte ``b`` is the code ``b ^ 0x80`` of ``table``'s
    order), each lane past channel ``c`` as the code ``pad_code``; ``uses[code]`` counts
    the lanes that held it.  The padding lanes, one code, are filled and counted a
    surface at a time (a 1-channel map in 8-lane atoms: 2.6x faster than a lookup per
    lane; a branch-free loop over the channels' lanes, 1.7x on whole atoms; measured
    2026-12-06)."""
    surfaces, h, w, atom = x.shape
    padded = table[pad_code]
    for s in range(surfaces):
        lanes = min(c - s * atom, atom)             # lanes holding channels: the rest pad
        for y in range(h):
            for p in range(w):
                for j in range(lanes):
                    code = np.int32(x[s, y, p, j]) ^ 0x80
                    out[s, y, p, j] = table[code]
                    uses[code] += 1
        if lanes < atom:
            out[s, :, :, lanes:] = padded
            uses[pad_code] += (atom - lanes) * h * w


class CdpPlan(NamedTuple):
    """A CDP operation as its registers program it (:func:`decode`)."""

    c: int
    h: int
    w: int
    src: tuple[int, int, int]        # base, line and surface strides
    dst: tuple[int, int, int]
    in_off: int                      # the padding lanes' int8 (DATIN_OFFSET's low byte)
    sqsum_bypass: bool
    local_size: int


def decode(g: GroupView, rdma: GroupView) -> CdpPlan:
    """The operation the CDP group ``g`` and CDP_RDMA group ``rdma`` program; an
    :class:`UnsupportedError` for a precision other than int8."""
    if g("D_DATA_FORMAT", "INPUT_DATA_TYPE") != 0 or rdma("D_DATA_FORMAT", "INPUT_DATA") != 0:
        raise UnsupportedError("CDP precision other than int8 is not modelled "
                               f"(CDP D_DATA_FORMAT={g('D_DATA_FORMAT'):#x}, CDP_RDMA "
                               f"D_DATA_FORMAT={rdma('D_DATA_FORMAT'):#x})")
    return CdpPlan(
        rdma("D_DATA_CUBE_CHANNEL", "CHANNEL") + 1, rdma("D_DATA_CUBE_HEIGHT", "HEIGHT") + 1,
        rdma("D_DATA_CUBE_WIDTH", "WIDTH") + 1,
        (rdma.addr("D_SRC_BASE_ADDR_LOW", "D_SRC_BASE_ADDR_HIGH"), rdma("D_SRC_LINE_STRIDE"),
         rdma("D_SRC_SURFACE_STRIDE")),
        (g.addr("D_DST_BASE_ADDR_LOW", "D_DST_BASE_ADDR_HIGH"), g("D_DST_LINE_STRIDE"),
         g("D_DST_SURFACE_STRIDE")),
        int(sign_extend(g("D_DATIN_OFFSET") & 0xFF, 8)), bool(g("D_FUNC_BYPASS", "SQSUM_BYPASS")),
        2 * g("D_LRN_CFG", "NORMALZ_LEN") + 3)


def run(g: GroupView, rdma: GroupView, dram: Dram, cfg: HwConfig, ram: LutRam,
        per_code: bool = False,
        tables: Callable[[GroupView, LutRam], CodeTable] | None = None,
        plan: CdpPlan | None = None) -> OpRecord:
    """Execute one CDP operation; return its record (``per_code``: see the module
    docstring; ``tables`` gives :func:`code_table`'s result, kept by the caller;
    ``plan``: :func:`decode` of ``g`` and ``rdma``, kept by the caller)."""
    p = plan or decode(g, rdma)
    c, h, w, a = p.c, p.h, p.w, cfg.atom_size
    c_pad = padded_channels(c, a)
    uses = None
    if per_code and p.sqsum_bypass:
        table = (tables or code_table)(g, ram)
        uses = _run_codes(dram, table, c, h, w, a, p.in_off, p.src, p.dst)
    if uses is not None:
        *hits, saturated = (table.counters @ uses).tolist()
        counts = dict(zip(CLASSES, hits, strict=True))
    else:
        x = read_int8_raw(dram, p.src[0], c_pad, h, w, a, p.src[1], p.src[2], "CDP_RDMA")
        ext = np.full((c_pad + 2 * HALO, h, w), p.in_off, dtype=np.int64)
        ext[HALO:HALO + c] = x[:c]                          # as int64
        out, sat, cls = _datapath(g, ram, ext, c_pad)
        saturated, counts = int(np.count_nonzero(sat)), hit_counts(cls)
        write_int8_cube(dram, p.dst[0], out, a, p.dst[1], p.dst[2], "CDP_WDMA")
    regs, grp = g.regs, g.group
    regs.set_hw("D_OUT_SATURATION", saturated, grp)  # all lanes, as the cmod
    for reg, key in LUT_COUNTERS:
        regs.set_hw(reg, counts[key], grp)
    return OpRecord("CDP", cdp_cycles(cfg, c_pad * h * w), (c, h, w),
                    {"lut": counts, "local_size": p.local_size})
