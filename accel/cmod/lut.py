"""The NVDLA lookup table: LE/LO RAMs behind ``S_LUT_ACCESS_*`` and the int8 lookup.

CDP and SDP each hold two tables of int16 entries: LE ("linear or
exponential", 65 entries, called *raw* in the cmod) and LO ("linear only",
257 entries, *density*).  Software fills them through ``S_LUT_ACCESS_CFG``
(``LUT_ADDR``, ``LUT_TABLE_ID`` 0 = LE / 1 = LO, ``LUT_ACCESS_TYPE`` 1 =
write) and then a stream of ``S_LUT_ACCESS_DATA`` writes; the address
increments after each access until it reaches the last entry, where further
writes keep overwriting that entry (NVDLA cmod ``cdp_reg_model``).

:func:`lookup_int` is the integer lookup of the int8 datapath (hw@master
cmod/cdp ``lookup_lut_int8``; NVDLA_FACTS section 3 describes the FP17 path
the cmod uses for fp16 only).  For an input ``x``:

* **linear** table with start ``S`` and index select ``k`` (6-bit signed):
  ``t = x - S``, ``i = t >> k`` (``t << -k`` when ``k < 0``).  ``t <= 0`` or
  ``i < 0`` is an *underflow*, ``i >= N`` (64 or 256) an *overflow*, else a
  *hit* interpolating ``L[i] + round((L[i+1] - L[i]) * f / 2**16)`` where
  ``f`` is the 16-bit fraction ``t mod 2**k`` (0 when ``k < 0``).
* **exponential** LE table with index offset ``o`` (int8):
  ``i = floor(log2(t)) - o``; the fraction is ``t - 2**floor(log2 t)`` scaled to
  16 bits.
* under/overflow extrapolate from the first/last entry:
  ``L[0] + round((x - S) * scale / 2**shift)`` (exponential underflow
  subtracts ``2**o`` more), ``L[N] + round((x - E) * scale / 2**shift)``;
  ``shift`` is a 5-bit *signed* field, so 16..31 multiply.
* every rounding is half away from zero, computed like the cmod in double
  precision, saturated to 56 bits, and the table result saturates to int16.
* both tables are evaluated; the result is chosen by the priorities of
  ``S_LUT_CFG`` (both underflow: ``UFLOW_PRIORITY``, both overflow:
  ``OFLOW_PRIORITY``, exactly one hit: that one, otherwise
  ``HYBRID_PRIORITY``; 0 selects LE, 1 LO) and counted in the hit counters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accel.arith import sign_extend

LE_ENTRIES, LO_ENTRIES = 65, 257


class LutRam:
    """The two int16 tables of one unit and their CSB access port."""

    def __init__(self, unit: str = "LUT") -> None:
        self.unit = unit
        # the cmod never initialises the tables; its module memory starts zeroed
        self.le = np.zeros(LE_ENTRIES, dtype=np.int64)
        self.lo = np.zeros(LO_ENTRIES, dtype=np.int64)
        self.table = 0
        self.addr = 0
        self.write_mode = False

    def access_cfg(self, value: int) -> None:
        """A write of ``S_LUT_ACCESS_CFG``."""
        self.addr = value & 0x3FF
        self.table = (value >> 16) & 1
        self.write_mode = bool((value >> 17) & 1)

    def _advance(self) -> None:
        if self.addr < (LO_ENTRIES if self.table else LE_ENTRIES) - 1:
            self.addr += 1

    def _check_addr(self) -> np.ndarray:
        tab = self.lo if self.table else self.le
        if self.addr >= tab.size:  # the cmod would index past its array
            from accel.cmod.errors import ConfigError
            raise ConfigError(self.unit, "S_LUT_ACCESS_CFG", self.addr | (self.table << 16),
                              f"LUT_ADDR {self.addr} is past the last entry "
                              f"{tab.size - 1} of table {('LE', 'LO')[self.table]}")
        return tab

    def access_data_write(self, value: int) -> None:
        """A write of ``S_LUT_ACCESS_DATA`` (ignored unless the port is in write mode)."""
        if not self.write_mode:
            return
        tab = self._check_addr()
        entry = value & 0xFFFF               # int16, two's complement (a Python int: no
        tab[self.addr] = entry - 0x10000 if entry & 0x8000 else entry   # array per entry)
        self._advance()

    def access_data_block(self, values: Sequence[int]) -> None:
        """Consecutive writes of ``S_LUT_ACCESS_DATA`` with ``values``, as one: the same
        entries and address as :meth:`access_data_write` of each in turn (the address
        stops at the table's last entry, which later values overwrite)."""
        self.write_entries(access_entries(values))

    def write_entries(self, entries: np.ndarray) -> None:
        """:meth:`access_data_block` of the entries the values write
        (:func:`access_entries`), decoded once by a caller that writes them again."""
        if not self.write_mode or not entries.size:
            return
        tab = self._check_addr()
        fits = min(entries.size, tab.size - self.addr)
        tab[self.addr:self.addr + fits] = entries[:fits]
        tab[-1] = tab[-1] if entries.size == fits else entries[-1]
        self.addr = min(self.addr + entries.size, tab.size - 1)

    def access_data_read(self) -> int:
        """A read of ``S_LUT_ACCESS_DATA`` (the entry as 16 unsigned bits)."""
        if self.write_mode:
            return 0
        tab = self._check_addr()
        value = int(tab[self.addr]) & 0xFFFF
        self._advance()
        return value


def access_entries(values: Sequence[int]) -> np.ndarray:
    """The LUT entries that writes of ``S_LUT_ACCESS_DATA`` with ``values`` store: the
    low 16 bits of each as two's complement (int64)."""
    v = np.asarray(values, dtype=np.int64) & 0xFFFF
    return np.where(v & 0x8000, v - 0x10000, v)


@dataclass(frozen=True)
class LutConfig:
    """Decoded ``S_LUT_*`` registers of one unit (CDP and SDP share the layout)."""

    le_exponent: bool
    uflow_lo: bool
    oflow_lo: bool
    hybrid_lo: bool
    le_index_offset: int
    le_index_select: int
    lo_index_select: int
    le_start: int
    le_end: int
    lo_start: int
    lo_end: int
    le_uflow_scale: int
    le_oflow_scale: int
    lo_uflow_scale: int
    lo_oflow_scale: int
    le_uflow_shift: int
    le_oflow_shift: int
    lo_uflow_shift: int
    lo_oflow_shift: int


def _sext6_like_cmod(v: int) -> int:
    """The cmod widens 6-bit fields by OR-ing 1s above bit 5 only when bit 5 is set."""
    return (v | ~0x3F) if v & 0x20 else v


def _addr38(g, name: str) -> int:
    high = _sext6_like_cmod(g(f"S_LUT_{name}_HIGH"))
    return (high << 32) | g(f"S_LUT_{name}_LOW")


def lut_config(g) -> LutConfig:
    """Decode the LUT registers from a register-group view ``g`` of CDP or SDP."""
    def f(reg, fld):
        return g(f"S_LUT_{reg}", f"LUT_{fld}")

    return LutConfig(
        le_exponent=f("CFG", "LE_FUNCTION") == 0,  # 0 = EXPONENT, 1 = LINEAR
        uflow_lo=bool(f("CFG", "UFLOW_PRIORITY")), oflow_lo=bool(f("CFG", "OFLOW_PRIORITY")),
        hybrid_lo=bool(f("CFG", "HYBRID_PRIORITY")),
        le_index_offset=int(sign_extend(f("INFO", "LE_INDEX_OFFSET"), 8)),
        le_index_select=_sext6_like_cmod(f("INFO", "LE_INDEX_SELECT")),
        lo_index_select=_sext6_like_cmod(f("INFO", "LO_INDEX_SELECT")),
        le_start=_addr38(g, "LE_START"), le_end=_addr38(g, "LE_END"),
        lo_start=_addr38(g, "LO_START"), lo_end=_addr38(g, "LO_END"),
        le_uflow_scale=int(sign_extend(f("LE_SLOPE_SCALE", "LE_SLOPE_UFLOW_SCALE"), 16)),
        le_oflow_scale=int(sign_extend(f("LE_SLOPE_SCALE", "LE_SLOPE_OFLOW_SCALE"), 16)),
        lo_uflow_scale=int(sign_extend(f("LO_SLOPE_SCALE", "LO_SLOPE_UFLOW_SCALE"), 16)),
        lo_oflow_scale=int(sign_extend(f("LO_SLOPE_SCALE", "LO_SLOPE_OFLOW_SCALE"), 16)),
        le_uflow_shift=int(sign_extend(f("LE_SLOPE_SHIFT", "LE_SLOPE_UFLOW_SHIFT"), 5)),
        le_oflow_shift=int(sign_extend(f("LE_SLOPE_SHIFT", "LE_SLOPE_OFLOW_SHIFT"), 5)),
        lo_uflow_shift=int(sign_extend(f("LO_SLOPE_SHIFT", "LO_SLOPE_UFLOW_SHIFT"), 5)),
        lo_oflow_shift=int(sign_extend(f("LO_SLOPE_SHIFT", "LO_SLOPE_OFLOW_SHIFT"), 5)),
    )


def convert(value: np.ndarray, shift: int, bits: int) -> np.ndarray:
    """``round_half_away(value / 2**shift)`` saturated to signed ``bits``, in doubles.

    The cmod divides the int64 ``value`` as a double by ``pow(2, shift)``
    (``shift`` may be negative), adds +-0.5 by the sign of ``value`` and
    truncates; results past 2**62 saturate.
    """
    v = np.asarray(value, dtype=np.int64).astype(np.float64)
    pos = v > 0
    q = v / np.float64(2.0) ** shift
    q = np.trunc(np.where(pos, q + 0.5, q - 0.5))
    big = float(1 << 62)
    out = np.clip(q, -big, big).astype(np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(out, lo, hi)


def _shr(x: np.ndarray, n: int) -> np.ndarray:
    """int64 arithmetic shift right by ``n`` as x86 does it (count mod 64)."""
    return np.right_shift(x, n & 63)


def _shl(x: np.ndarray, n: int) -> np.ndarray:
    return np.left_shift(x, n & 63)  # wraps like the C code


def _fraction16(frac: np.ndarray, bits: np.ndarray | int) -> np.ndarray:
    """A ``bits``-bit fraction rescaled to 16 bits (the RTL keeps 16)."""
    bits = np.asarray(bits, dtype=np.int64)
    down = np.right_shift(frac, (bits - 16) & 63)  # int64 shift count, mod 64 on x86
    up = np.left_shift(frac, np.clip(16 - bits, 0, 63))
    return np.where(bits > 16, down, up)


def _interp(table: np.ndarray, idx: np.ndarray, frac16: np.ndarray) -> np.ndarray:
    r0, r1 = table[idx], table[idx + 1]
    return convert(r0 + convert((r1 - r0) * frac16, 16, 56), 0, 16)


def _extrapolate(base: int, dx: np.ndarray, scale: int, shift: int) -> np.ndarray:
    return convert(base + convert(dx * scale, shift, 56), 0, 16)


def _linear(x: np.ndarray, table: np.ndarray, start: int, end: int, select: int,
            ufl: tuple[int, int], ofl: tuple[int, int]):
    n = table.size - 1
    t = x - start
    idx = _shl(t, -select) if select < 0 else _shr(t, select)
    under = (idx < 0) | (t <= 0)
    over = ~under & (idx >= n)
    hit = ~under & ~over
    res = np.zeros(x.shape, dtype=np.int64)
    if under.any():
        res[under] = _extrapolate(int(table[0]), x[under] - start, *ufl)
    if over.any():
        res[over] = _extrapolate(int(table[n]), x[over] - end, *ofl)
    if hit.any():
        if select < 0:
            frac = np.zeros(int(hit.sum()), dtype=np.int64)
        else:
            # C: t % (1 << select) with an int shift (count mod 32; 1 << 31 acts as 2**31)
            frac = _fraction16(t[hit] % (1 << (select & 31)), select)
        res[hit] = _interp(table, idx[hit], frac)
    return res, under, over, hit


def _exponential(x: np.ndarray, table: np.ndarray, start: int, end: int, offset: int,
                 ufl: tuple[int, int], ofl: tuple[int, int]):
    n = table.size - 1
    t = x - start
    pos = t > 0
    log = np.zeros(x.shape, dtype=np.int64)
    # floor(log2(t)) of an integer < 2**47 equals its bit length - 1
    log[pos] = np.floor(np.log2(t[pos].astype(np.float64))).astype(np.int64)
    idx = log - offset
    under = (idx < 0) | ~pos
    over = ~under & (idx >= n)
    hit = ~under & ~over
    res = np.zeros(x.shape, dtype=np.int64)
    if under.any():
        adj = 0 if offset < 0 else int(np.left_shift(np.int64(1), offset & 63))
        res[under] = _extrapolate(int(table[0]), x[under] - start - adj, *ufl)
    if over.any():
        res[over] = _extrapolate(int(table[n]), x[over] - end, *ofl)
    if hit.any():
        lh = log[hit]
        frac = _fraction16(t[hit] - np.left_shift(np.int64(1), lh), lh)
        res[hit] = _interp(table, idx[hit], frac)
    return res, under, over, hit


#: the counter registers of a unit with a LUT (CDP, SDP) and the keys of its lookup's counts
LUT_COUNTERS = (("D_PERF_LUT_UFLOW", "uflow"), ("D_PERF_LUT_OFLOW", "oflow"),
                ("D_PERF_LUT_HYBRID", "hybrid"), ("D_PERF_LUT_LE_HIT", "le_hit"),
                ("D_PERF_LUT_LO_HIT", "lo_hit"))

#: the hit counter each looked-up value adds to (:func:`lookup_classes`' class numbers)
CLASSES = ("uflow", "oflow", "le_hit", "lo_hit", "hybrid")


def lookup_classes(x: np.ndarray, ram: LutRam, c: LutConfig) -> tuple[np.ndarray, np.ndarray]:
    """int16 LUT result for every element of the int64 array ``x``, and the number (an
    index into :data:`CLASSES`) of the hit counter each element adds to."""
    x = np.asarray(x, dtype=np.int64)
    if c.le_exponent:
        le = _exponential(x, ram.le, c.le_start, c.le_end, c.le_index_offset,
                          (c.le_uflow_scale, c.le_uflow_shift),
                          (c.le_oflow_scale, c.le_oflow_shift))
    else:
        le = _linear(x, ram.le, c.le_start, c.le_end, c.le_index_select,
                     (c.le_uflow_scale, c.le_uflow_shift), (c.le_oflow_scale, c.le_oflow_shift))
    lo = _linear(x, ram.lo, c.lo_start, c.lo_end, c.lo_index_select,
                 (c.lo_uflow_scale, c.lo_uflow_shift), (c.lo_oflow_scale, c.lo_oflow_shift))
    (le_v, le_u, le_o, le_h), (lo_v, lo_u, lo_o, lo_h) = le, lo
    uflow = le_u & lo_u
    oflow = ~uflow & le_o & lo_o
    rest = ~uflow & ~oflow
    only = rest & (le_h ^ lo_h)
    hybrid = rest & ~(le_h ^ lo_h)
    pick_lo = ((uflow & c.uflow_lo) | (oflow & c.oflow_lo) | (only & lo_h)
               | (hybrid & c.hybrid_lo))
    out = np.where(pick_lo, lo_v, le_v)
    # every element is in exactly one: uflow, oflow, only (LE or LO hit), hybrid
    cls = np.select([uflow, oflow, only & le_h, only & lo_h], [0, 1, 2, 3], 4)
    return out, cls


def hit_counts(cls: np.ndarray, weights: np.ndarray | None = None) -> dict[str, int]:
    """The hit counters of elements of classes ``cls``, each counted ``weights`` times."""
    n = np.bincount(np.ravel(cls), None if weights is None else np.ravel(weights),
                    minlength=len(CLASSES))
    return {name: int(round(k)) for name, k in zip(CLASSES, n, strict=True)}


def lookup_int(x: np.ndarray, ram: LutRam, c: LutConfig, weights: np.ndarray | None = None
               ) -> tuple[np.ndarray, dict]:
    """int16 LUT result for every element of the int64 array ``x``, plus hit counters;
    ``weights`` (as many as ``x``): each element counts that many times (an element
    standing for every lane that holds its value)."""
    out, cls = lookup_classes(x, ram, c)
    return out, hit_counts(cls, weights)
