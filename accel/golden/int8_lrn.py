"""Independent int8 reference of LRN as NVDLA's CDP computes it.

Written from the CDP description (NVDLA_FACTS section 3, "CDP (LRN)", and
NVIDIA's cmod ``lookup_lut_int8``), deliberately without any code from
``accel`` (neither the cmodel nor ``accel.arith``): this is the CPU golden
the compiled CDP operation must match bit for bit.  For an int8 NCHW cube
``x`` (batch 1) and the integer parameters the compiler chose::

    v   = sat9(round((x - in_off) * in_scale / 2**in_shift))      input converter
    S   = sum of v**2 over the `size` channels centred on c         exact integer
          (v itself with D_FUNC_BYPASS.SQSUM_BYPASS)
    L   = LUT(S)                                                    int16, see below
    y   = L * v[c]                                                  25 bits, exact
          (L itself with D_FUNC_BYPASS.MUL_BYPASS)
    out = sat8(round((y - out_off) * out_scale / 2**out_shift))     output converter

Channels outside the cube (before channel 0, after channel C-1, and the
lanes that pad the last atom in memory, whatever they hold) are read as the
input offset and converted like real lanes: ``v = 0``.  They add nothing to
``S``, which is exactly ONNX's zero padding of the window.  The offset is an
int8 here (the CDP pads with the register's low byte).

The LUT has two *linear* tables (NVDLA also offers an exponential LE table;
the compiler does not use it and this reference does not model it).  For a table with
``N + 1`` entries ``T``, start ``s`` and index select ``k``, ``t = S - s``:

* ``t <= 0`` (or a negative index): **underflow**, ``T[0] + round(t * m_u)``;
* ``idx = t >> k >= N``: **overflow**, ``T[N] + round((S - end) * m_o)``
  with ``end = s + N * 2**k``;
* else a **hit**: ``T[idx] + round((T[idx+1] - T[idx]) * f16 / 2**16)``
  where ``f16`` is the fraction ``t mod 2**k`` as 16 bits (shifted left by
  ``16 - k``, or right - truncating - by ``k - 16``).

Slopes ``m`` are ``scale / 2**shift`` with a signed 5-bit shift (a negative
shift multiplies).  Every rounding is half away from zero; each table's
result saturates to int16.  The two results are combined as NVDLA does:
both underflow -> the underflow-priority table, both overflow -> the
overflow-priority table, exactly one hit -> that table, anything else
(both hit, or one under- and one overflow) -> the hybrid-priority table.

The cmod evaluates the int8 LUT in integers (its ``convert`` helper divides
in double precision, which is exact for these magnitudes); the FP17 path of
the cmod's ``HLS_CDP_lookup_lut`` is taken for fp16 data only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LE_ENTRIES, LO_ENTRIES = 65, 257


def round_shift(x: np.ndarray, n: int) -> np.ndarray:
    """``x / 2**n`` rounded half away from zero, on int64; ``n <= 0`` multiplies by ``2**-n``.

    >>> round_shift(np.array([5, -5, 6, -6, 7]), 2).tolist()
    [1, -1, 2, -2, 2]
    >>> round_shift(np.array([3, -3]), -2).tolist()
    [12, -12]
    """
    x = np.asarray(x, dtype=np.int64)
    if n <= 0:
        return x * (1 << -n)
    mag = (np.abs(x) + (1 << (n - 1))) >> n
    return np.where(x < 0, -mag, mag)


def saturate(x: np.ndarray, bits: int) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range."""
    return np.clip(np.asarray(x, dtype=np.int64), -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


@dataclass(frozen=True)
class Table:
    """One linear LUT table: entries, start, index select, slopes ``(scale, shift)``."""

    entries: tuple[int, ...]
    start: int
    index_select: int
    underflow: tuple[int, int] = (0, 0)
    overflow: tuple[int, int] = (0, 0)

    @property
    def end(self) -> int:
        n = len(self.entries) - 1
        k = self.index_select
        return self.start + (n << k if k >= 0 else n >> -k)


def _slope(dx: np.ndarray, slope: tuple[int, int]) -> np.ndarray:
    scale, shift = slope
    if not -16 <= shift <= 15:
        raise ValueError(f"slope shift {shift} outside the signed 5-bit range -16..15")
    return round_shift(dx * scale, shift)


def table_lookup(s: np.ndarray, tab: Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(value, underflow, overflow)`` of one linear table for the sums ``s``."""
    s = np.asarray(s, dtype=np.int64)
    t_ = np.asarray(tab.entries, dtype=np.int64)
    n, k = t_.size - 1, tab.index_select
    t = s - tab.start
    idx = t >> k if k >= 0 else t << -k
    under = (t <= 0) | (idx < 0)
    over = ~under & (idx >= n)
    i = np.clip(idx, 0, n - 1)
    if k < 0:
        f16 = np.zeros_like(t)
    else:
        frac = t - (idx << k)                          # t mod 2**k for t > 0
        f16 = frac << (16 - k) if k <= 16 else frac >> (k - 16)
    hit_v = t_[i] + saturate(round_shift((t_[i + 1] - t_[i]) * f16, 16), 56)
    under_v = t_[0] + saturate(_slope(t, tab.underflow), 56)
    over_v = t_[n] + saturate(_slope(s - tab.end, tab.overflow), 56)
    value = np.where(under, under_v, np.where(over, over_v, hit_v))
    return saturate(value, 16), under, over


@dataclass(frozen=True)
class Lut:
    """The CDP LUT as the compiler programs it: two linear tables and the priorities
    (``True`` selects LO, ``False`` LE)."""

    le: Table
    lo: Table
    underflow_lo: bool
    overflow_lo: bool
    hybrid_lo: bool


def lut_lookup(s: np.ndarray, lut: Lut) -> np.ndarray:
    """int16 LUT results for the int64 sums ``s``."""
    if len(lut.le.entries) != LE_ENTRIES or len(lut.lo.entries) != LO_ENTRIES:
        raise ValueError(f"LE/LO tables need {LE_ENTRIES}/{LO_ENTRIES} entries, got "
                         f"{len(lut.le.entries)}/{len(lut.lo.entries)}")
    le, le_u, le_o = table_lookup(s, lut.le)
    lo, lo_u, lo_o = table_lookup(s, lut.lo)
    le_h, lo_h = ~le_u & ~le_o, ~lo_u & ~lo_o
    both_under, both_over = le_u & lo_u, le_o & lo_o
    one_hit = le_h ^ lo_h
    pick_lo = np.where(both_under, lut.underflow_lo,
                       np.where(both_over, lut.overflow_lo,
                                np.where(one_hit, lo_h, lut.hybrid_lo)))
    return np.where(pick_lo, lo, le)


def square_sums(v: np.ndarray, size: int) -> np.ndarray:
    """Window sums of ``v**2`` over ``size`` channels centred on each channel of the
    CHW (or NCHW, axis -3) array ``v``; channels outside the array count as 0.

    >>> square_sums(np.array([1, 2, 3, 4]).reshape(4, 1, 1), 3).ravel().tolist()
    [5, 14, 29, 25]
    """
    if size not in (3, 5, 7, 9):
        raise ValueError(f"local size {size} not in 3, 5, 7, 9")
    v = np.asarray(v, dtype=np.int64)
    half = size // 2
    c = v.shape[-3]
    widths = [(0, 0)] * v.ndim
    widths[-3] = (half, half)
    sq = np.pad(v, widths) ** 2
    out = np.zeros(v.shape, dtype=np.int64)
    for j in range(size):
        out += sq[..., j:j + c, :, :]
    return out


def lrn_int8(x: np.ndarray, size: int, lut: Lut, in_cvt: tuple[int, int, int] = (0, 1, 0),
             out_cvt: tuple[int, int, int] = (0, 1, 0), *, sqsum_bypass: bool = False,
             mul_bypass: bool = False) -> np.ndarray:
    """The CDP's LRN of the int8 NCHW (or CHW) array ``x``; converters are
    ``(offset, scale, shift)``.

    ``D_FUNC_BYPASS`` as the CDP has it: ``sqsum_bypass`` looks up ``v`` itself instead of
    its window's square sum (``size`` is then unused), ``mul_bypass`` passes the LUT's
    result on without multiplying it by ``v``.  With both, the CDP is an element-wise
    table of ``v``: any shape of ``x`` will do."""
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise ValueError(f"input must be int8, got {x.dtype}")
    in_off, in_scale, in_shift = in_cvt
    out_off, out_scale, out_shift = out_cvt
    if not -128 <= in_off <= 127:
        raise ValueError(f"input offset {in_off}: only int8 offsets are modelled")
    v = saturate(round_shift((x.astype(np.int64) - in_off) * in_scale, in_shift), 9)
    s = v if sqsum_bypass else square_sums(v, size)
    looked = lut_lookup(s, lut)
    y = looked if mul_bypass else looked * v
    out = saturate(round_shift((y - out_off) * out_scale, out_shift), 8)
    return out.astype(np.int8)


__all__ = ["LE_ENTRIES", "LO_ENTRIES", "Lut", "Table", "lrn_int8", "lut_lookup",
           "round_shift", "saturate", "square_sums", "table_lookup"]
