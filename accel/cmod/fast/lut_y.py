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


@njit(cache=True, nogil=True)
def _lookup(x, out, le_tab, lo_tab, p):
    """Fill ``out`` with the lookup of ``x`` (both flat int64); returns the counts of
    under-, overflows, LE hits and LO hits."""
    le_exp, u_lo, o_lo, h_lo, off, le_sel, lo_sel = p[0], p[1], p[2], p[3], p[4], p[5], p[6]
    le_start, le_end, lo_start, lo_end = p[7], p[8], p[9], p[10]
    n_uflow = n_oflow = n_le = n_lo = 0
    for i in range(x.size):
        v = x[i]
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
        out[i] = r
        n_uflow += uflow
        n_oflow += oflow
        n_le += le_hit
        n_lo += lo_hit
    return n_uflow, n_oflow, n_le, n_lo


def params_array(p: LutConfig) -> np.ndarray:
    """``p`` as the int64 vector the compiled loop reads."""
    return np.array([p.le_exponent, p.uflow_lo, p.oflow_lo, p.hybrid_lo, p.le_index_offset,
                     p.le_index_select, p.lo_index_select, p.le_start, p.le_end, p.lo_start,
                     p.lo_end, p.le_uflow_scale, p.le_uflow_shift, p.le_oflow_scale,
                     p.le_oflow_shift, p.lo_uflow_scale, p.lo_uflow_shift, p.lo_oflow_scale,
                     p.lo_oflow_shift], dtype=np.int64)


def lookup(x: np.ndarray, ram: LutRam, g) -> tuple[np.ndarray, dict]:
    """:func:`accel.cmod.sdp_y.lookup` of int64 ``x`` with the LUT ``ram`` and the
    registers of ``g``, in one compiled pass."""
    flat = np.ascontiguousarray(x, dtype=np.int64).reshape(-1)
    out = np.empty_like(flat)
    uflow, oflow, le_hit, lo_hit = _lookup(flat, out, ram.le.astype(np.int64),
                                           ram.lo.astype(np.int64),
                                           params_array(lut_params(g)))
    counts = {"uflow": int(uflow), "oflow": int(oflow), "le_hit": int(le_hit),
              "lo_hit": int(lo_hit)}
    counts["hybrid"] = (flat.size - sum(counts.values())) & 0xFFFFFFFF
    return out.reshape(x.shape), counts
