"""The SDP Y stage's LUT as one compiled loop over the elements.

:func:`accel.cmod.sdp_y.lookup` computes the lookup as whole-array numpy passes:
both tables' index logic, the choice between them, interpolation and the
extrapolated under- and overflows, each a temporary array of the cube's size -
about thirty passes, which made a convolution with a fused SiLU on nv_large
several times slower than the convolution.  :func:`lookup` here walks the
elements once with the same integer rules, written for one element
(``_element``); the register fields come decoded from
:func:`accel.cmod.sdp_y.lut_params`.  The result and the counters are the plain
lookup's: ``tests/accel/cmod/fast/test_lut_y.py`` compares the two on values
around every edge of several configurations, and the conformance tests run the
NVDLA trace with a Y LUT and the zoo's SiLU detectors fast and plain.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from accel.arith import shift_round_int
from accel.cmod.lut import LutConfig, LutRam
from accel.cmod.sdp_y import FRAC, lut_params
from accel.jit import njit

_shift_round = njit(inline="always")(shift_round_int)
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_FRAC_ONE = 1 << FRAC


@njit(inline="always")
def _sat32(v):
    return min(max(v, _I32_MIN), _I32_MAX)


@njit(inline="always")
def _round_shift(v, shift):
    """:func:`accel.cmod.sdp_y.round_shift` of one value (``shift`` >= 0)."""
    if shift <= 62:
        return _shift_round(v, shift)
    if shift == 63:
        if v >= (1 << 62):
            return 1
        if v <= -(1 << 62):
            return -1
        return 0
    return 0


@njit(inline="always")
def _signed_shift(v, shift):
    if shift >= 0:
        return _round_shift(v, shift)
    return min(max(v, -(1 << 46)), 1 << 46) << -shift


@njit(inline="always")
def _sext32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= (1 << 31) else v


@njit(inline="always")
def _linear(x, start, select, depth):
    """(under, over, address, fraction) of a linear table, as ``sdp_y._linear_index``."""
    under = x <= start
    u = 0 if under else (x - start) & 0xFFFFFFFF
    if select >= 0:
        idx = min(u >> min(select, 63), 511)
    else:
        k = min(-select, 10)
        idx = 511 if u > (511 >> k) else u << k
    over = (not under) and idx >= depth
    frac = 0
    if select >= 0:
        mask = (np.int64(1) << (select & 63)) - 1
        data = _sext32(u & mask) & (_FRAC_ONE - 1)
        if select <= FRAC:
            frac = (data << (FRAC - select)) & (_FRAC_ONE - 1)
        else:
            frac = data >> min(select - FRAC, 63)
    addr = 0 if under else (depth if over else idx)
    return under, over, addr, frac


@njit(inline="always")
def _exponential(x, start, offset):
    """(under, over, address, fraction) of the exponential LE table (``sdp_y._exp_index``)."""
    under = x <= start
    u = 0 if under else x - start
    log = 0
    while (u >> (log + 1)) > 0:       # floor(log2(u)) for u > 0, exactly
        log += 1
    under = under or log < offset
    s = log - offset
    over = (not under) and s >= 64
    if under or over:
        return under, over, 0 if under else 64, 0
    return under, over, s, (u - (np.int64(1) << log)) << (FRAC - log)


@njit(inline="always")
def lut_element(v, le_tab, lo_tab, p):
    """The lookup of one value ``v``: ``(result, underflow, overflow, LE hit, LO hit)``
    (``p``: :func:`params_array`)."""
    le_exp, u_lo, o_lo, h_lo, off, le_sel, lo_sel = p[0], p[1], p[2], p[3], p[4], p[5], p[6]
    le_start, le_end, lo_start, lo_end = p[7], p[8], p[9], p[10]
    if le_exp:
        le_u, le_o, le_a, le_f = _exponential(v, le_start, off)
    else:
        le_u, le_o, le_a, le_f = _linear(v, le_start, le_sel, 64)
    lo_u, lo_o, lo_a, lo_f = _linear(v, lo_start, lo_sel, 256)
    le_hit, lo_hit = not (le_u or le_o), not (lo_u or lo_o)
    both_u, both_o = le_u and lo_u, le_o and lo_o
    same = (not both_u) and (not both_o) and le_hit == lo_hit
    use_lo = ((both_u and u_lo) or (both_o and o_lo) or (same and h_lo)
              or ((not both_u) and (not both_o) and (not same) and lo_hit))
    if use_lo:
        addr, frac, uflow, oflow = lo_a, lo_f, lo_u, lo_o
        y0, y1 = lo_tab[min(addr, 256)], lo_tab[min(addr + 1, 256)]
    else:
        addr, frac, uflow, oflow = le_a, le_f, le_u, le_o
        y0, y1 = le_tab[min(addr, 64)], le_tab[min(addr + 1, 64)]
    r = _sat32(_round_shift(y0 * (_FRAC_ONE - frac) + y1 * frac, FRAC))
    if uflow or oflow:
        # slope scale and shift: LE/LO x UFLOW/OFLOW at p[11 + 2 * (2 * lo + over)]
        j = 11 + 2 * (2 * use_lo + oflow)
        bias = 0
        if uflow and not use_lo and le_exp and off > 0:
            bias = np.int64(1) << (off & 31)
        edge = (lo_end if oflow else lo_start) if use_lo else (le_end if oflow else le_start)
        c = _sat32(_signed_shift((v - (bias + edge)) * p[j], p[j + 1]))
        r = _sat32(y0 + c)
    return r, uflow, oflow, le_hit, lo_hit


#: values a :class:`YTable` holds the lookup of: ``-HALF .. HALF - 1``.  The compiler
#: scales a Y stage's input into a few hundred values (yolox_nano_silu's span -321..176)
HALF = 1 << 15


class YTable(NamedTuple):
    """A LUT and its lookup of every value in ``-HALF .. HALF - 1``, each with its
    counter bits (1 underflow, 2 overflow, 4 LE hit, 8 LO hit): an input whose values
    all lie there is looked up in it."""

    params: np.ndarray        # :func:`params_array`
    le: np.ndarray            # entries, int64
    lo: np.ndarray
    values: np.ndarray        # int64 [2 * HALF]
    flags: np.ndarray         # int8 [2 * HALF]


@njit(cache=True, nogil=True)
def _lookup(x, out, flags, le_tab, lo_tab, p):
    """Fill ``out`` with the lookup of ``x`` (flat int64) and ``flags`` with each one's
    counter bits (1 underflow, 2 overflow, 4 LE hit, 8 LO hit)."""
    for i in range(x.size):
        r, uflow, oflow, le_hit, lo_hit = lut_element(x[i], le_tab, lo_tab, p)
        out[i] = r
        flags[i] = uflow | (oflow << 1) | (le_hit << 2) | (lo_hit << 3)


@njit(inline="always")
def add_flags(f, counts):
    """``counts`` (four running sums: under-, overflows, LE hits, LO hits) with the
    counter bits ``f`` of one value added (1 underflow, 2 overflow, 4 LE hit, 8 LO
    hit): sums a loop keeps in registers, where counting into an array in memory
    makes every element wait for the previous one's store."""
    return (counts[0] + (f & 1), counts[1] + ((f >> 1) & 1), counts[2] + ((f >> 2) & 1),
            counts[3] + ((f >> 3) & 1))


@njit(inline="always")
def from_table(src, dst, values, flags, counts):
    """The lookup of each value ``v`` of ``src`` into ``dst`` (the same array for in
    place) through a table: ``values[v + half]`` with its counter bits ``flags[v +
    half]`` added to ``counts`` (int64 ``[4]``, the order of :func:`add_flags`);
    ``half`` is half the table's length (:data:`HALF` for a :class:`YTable`).  False at
    the first value outside the table, ``dst`` then unfinished and ``counts`` as on
    entry.  No lookup of its own in the loop: a call to one in the same loop, even
    untaken, slows every element down some fifty-fold."""
    half = values.shape[0] // 2
    n = (0, 0, 0, 0)
    for p in range(src.shape[0]):
        i = src[p] + half
        if i < 0 or i >= 2 * half:
            return False
        dst[p] = values[i]
        n = add_flags(flags[i], n)
    for j in range(4):
        counts[j] += n[j]
    return True


@njit(cache=True, nogil=True)
def _from_table(x, out, values, flags, counts):
    return from_table(x, out, values, flags, counts)


def counters(counts, total: int) -> dict[str, int]:
    """The LUT counters from the counts of under-, overflows, LE and LO hits among
    ``total`` values (the rest are hybrids, as the cmod writes them: mod 2**32)."""
    out = {k: int(v) for k, v in zip(("uflow", "oflow", "le_hit", "lo_hit"), counts,
                                       strict=True)}
    out["hybrid"] = (total - sum(out.values())) & 0xFFFFFFFF
    return out


def bit_counts(flags: np.ndarray) -> list[int]:
    """Under-, overflows, LE and LO hits among the counter bits ``flags``."""
    histogram = np.bincount(flags.reshape(-1).view(np.uint8), minlength=16)
    return [int(histogram[[b for b in range(16) if b & bit]].sum()) for bit in (1, 2, 4, 8)]


def y_table(ram: LutRam, g) -> YTable:
    """The lookup of every value of ``-HALF .. HALF - 1`` with the LUT ``ram`` and the
    registers of ``g`` (kept by the speed layer: a few ms to make)."""
    params, (le, lo) = params_array(lut_params(g)), tables(ram)
    values = np.arange(-HALF, HALF, dtype=np.int64)
    out, flags = np.empty_like(values), np.empty(values.size, dtype=np.int8)
    _lookup(values, out, flags, le, lo, params)
    return YTable(params, le, lo, out, flags)


def tables(ram: LutRam) -> tuple[np.ndarray, np.ndarray]:
    """The LE and LO entries as the compiled loops read them (int64)."""
    return ram.le.astype(np.int64), ram.lo.astype(np.int64)


def params_array(p: LutConfig) -> np.ndarray:
    """``p`` as the int64 vector the compiled loop reads."""
    return np.array([p.le_exponent, p.uflow_lo, p.oflow_lo, p.hybrid_lo, p.le_index_offset,
                     p.le_index_select, p.lo_index_select, p.le_start, p.le_end, p.lo_start,
                     p.lo_end, p.le_uflow_scale, p.le_uflow_shift, p.le_oflow_scale,
                     p.le_oflow_shift, p.lo_uflow_scale, p.lo_uflow_shift, p.lo_oflow_scale,
                     p.lo_oflow_shift], dtype=np.int64)


def lookup(x: np.ndarray, ram: LutRam, g, table: YTable | None = None
           ) -> tuple[np.ndarray, dict]:
    """:func:`accel.cmod.sdp_y.lookup` of int64 ``x`` with the LUT ``ram`` and the
    registers of ``g``, in one compiled pass (through ``table``, :func:`y_table` of the
    same LUT and registers, when given)."""
    flat = np.ascontiguousarray(x, dtype=np.int64).reshape(-1)
    out = np.empty_like(flat)
    counts = np.zeros(4, dtype=np.int64)
    if table is not None and _from_table(flat, out, table.values, table.flags, counts):
        return out.reshape(x.shape), counters(counts, flat.size)
    flags = np.empty(flat.size, dtype=np.int8)
    if table is not None:
        _lookup(flat, out, flags, table.le, table.lo, table.params)
    else:
        _lookup(flat, out, flags, *tables(ram), params_array(lut_params(g)))
    return out.reshape(x.shape), counters(bit_counts(flags), flat.size)
