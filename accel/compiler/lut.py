"""Lookup tables for the SDP's Y stage: an int8 input indexes the LO table exactly.

An element-wise function ``f`` of an int8 tensor (scale ``s_in``) has only
256 possible inputs, so its int8 result (scale ``s_out``) is a table of 256
values computed once, in float64, with a single rounding::

    T[i] = sat8(round(f(s_in * (i - 128 - z_in)) / s_out) + z_out)       i = 0 .. 255

(``z_in`` / ``z_out`` the zero points: the table is indexed by the code and
holds codes, so zero points cost nothing).

The SDP LUT holds it in its 257-entry linear-only (LO) table: start -128 and
index select 0 make the index ``x + 128`` with no fraction, so every hit reads
``T[x + 128]`` with no interpolation.  ``x = -128`` is not above the start and
underflows, ``x >= 128`` (only from X stages that leave the int8 range)
overflows; both slopes are 0, so they read entry 0 and entry 256 (= ``T[255]``),
the saturation of an int8 input.  The linear-exponential (LE) table is kept
out of the way: its start at the int32 maximum makes every value underflow
it, and the LO table has every priority (underflow, overflow and hybrid), so
the LO result is always the one chosen.  The output converter is the
identity: the table already holds output units.

The independent evaluator the int8 golden uses is
:func:`accel.golden.int8_ref.sdp_lut_int8`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from accel.compiler.quantize import round_half_away
from accel.loadable.descriptors_aux import (
    LUT_LINEAR_EXP_ENTRIES,
    LUT_LINEAR_ONLY_ENTRIES,
    FloatData,
    LutParam,
)

LINEAR, LO = 1, 1               # dla_lut_param.method LINEAR; priority value of the LO table
INT32_MAX = (1 << 31) - 1
START = -128                    # the LO table's start: index = x - START


def _u64(v: int) -> int:
    """A signed start/end as dla_lut_param's u64 field (two's complement)."""
    return v & ((1 << 64) - 1)


def int8_table(f: Callable[[np.ndarray], np.ndarray], s_in: float, s_out: float,
               z_in: int = 0, z_out: int = 0) -> np.ndarray:
    """``T[i] = sat8(round(f(s_in * (i - 128 - z_in)) / s_out) + z_out)`` for i in 0..255
    (int64).

    ``f`` maps a float64 array to a float64 array; it is evaluated at the 256
    real values an int8 input can stand for.  NaN results are refused (a
    function undefined on part of the input range has no table).
    """
    if not (s_in > 0 and s_out > 0):
        raise ValueError(f"scales must be positive, got s_in={s_in}, s_out={s_out}")
    x = s_in * (np.arange(256, dtype=np.float64) + START - z_in)
    with np.errstate(all="ignore"):      # NaN and infinities are handled below
        y = np.asarray(f(x), dtype=np.float64)
    if y.shape != x.shape:
        raise ValueError(f"the function returned shape {y.shape} for {x.shape} inputs")
    if np.isnan(y).any():
        bad = x[np.isnan(y)]
        raise ValueError(f"the function is undefined (NaN) at {bad.size} of the 256 int8 "
                         f"inputs, e.g. {bad[0]:g}")
    q = round_half_away(np.clip(y / s_out, -1e6, 1e6)) + z_out   # infinities saturate too
    return np.clip(q, -128, 127).astype(np.int64)


def lo_table_lut(table: np.ndarray, start: int = START) -> LutParam:
    """The ``dla_lut_param`` that maps ``x`` to ``table[x - start]`` for ``x`` in
    ``start .. start + 255`` (see the module docstring): the SDP looks up the int8 value
    itself (``start`` -128); the CDP as a table looks up its input converter's
    ``x + 128`` (``start`` 0, :mod:`accel.compiler.ops.lookup`).  ``table`` holds 256
    int16 values."""
    t = np.asarray(table, dtype=np.int64).reshape(-1)
    if t.size != 256:
        raise ValueError(f"an int8-indexed table has 256 entries, got {t.size}")
    if t.min() < -32768 or t.max() > 32767:
        raise ValueError(f"table entries must be int16, got [{t.min()}, {t.max()}]")
    lo = [int(v) for v in t] + [int(t[-1])]
    assert len(lo) == LUT_LINEAR_ONLY_ENTRIES
    flat = FloatData(scale=0, shifter=0, reserved0=0)
    return LutParam(linear_exp_table=[0] * LUT_LINEAR_EXP_ENTRIES, linear_only_table=lo,
                    linear_exp_offset=0, linear_only_offset=0,
                    linear_exp_start=INT32_MAX, linear_exp_end=INT32_MAX,
                    linear_only_start=_u64(start), linear_only_end=_u64(start + 256),
                    linear_exp_underflow_slope=flat, linear_exp_overflow_slope=flat,
                    linear_only_underflow_slope=flat, linear_only_overflow_slope=flat,
                    hybrid_priority=LO, underflow_priority=LO, overflow_priority=LO,
                    method=LINEAR)


def int8_lut(f: Callable[[np.ndarray], np.ndarray], s_in: float, s_out: float,
             z_in: int = 0, z_out: int = 0) -> LutParam:
    """The LUT computing ``f`` from int8 at ``(s_in, z_in)`` to int8 at ``(s_out, z_out)``."""
    return lo_table_lut(int8_table(f, s_in, s_out, z_in, z_out))
