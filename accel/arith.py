"""Integer primitives shared by every NVDLA datapath model.

Every right shift in NVDLA's int8 pipeline (CACC clip-truncate, SDP X
truncate, SDP output converter, PDP average, CDP converters) rounds half away
from zero and then saturates (``ac_fixed<..., AC_RND_INF, AC_SAT>`` in the
NVDLA cmod).  :func:`shift_round_sat` implements that rule once, vectorized
over numpy int64 arrays; all units call it.

Worked examples (round half away from zero):

>>> import numpy as np
>>> shift_round_sat(np.array([5, -5, 6, -6, 7]), 1, 32).tolist()
[3, -3, 3, -3, 4]
>>> shift_round_sat(np.array([300]), 0, 8).tolist()
[127]
"""

from __future__ import annotations

import numpy as np


def sat_bounds(bits: int) -> tuple[int, int]:
    """Signed range [lo, hi] of a ``bits``-wide two's-complement integer."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


try:   # numpy >= 2: the ufunc behind np.clip, without np.clip's Python-level dispatch
    from numpy._core.umath import clip as _clip
except ImportError:  # pragma: no cover - older numpy
    _clip = np.clip


def saturate(x: np.ndarray, bits: int, out: np.ndarray | None = None) -> np.ndarray:
    """Clamp ``x`` to the signed ``bits``-wide range (into ``out`` when given)."""
    lo, hi = sat_bounds(bits)
    return _clip(np.asarray(x, dtype=np.int64), lo, hi, out=out)


def clamp(x: np.ndarray, lo: int, hi: int, out: np.ndarray | None = None) -> np.ndarray:
    """``x`` limited to ``[lo, hi]`` (into ``out`` when given), e.g. a saturation and a
    ReLU in one pass: ``clamp(x, 0, 2**31 - 1)``."""
    return _clip(x, lo, hi, out=out)


def saturation_mask(x: np.ndarray, bits: int) -> np.ndarray:
    """Boolean mask of the elements of ``x`` outside the signed ``bits`` range."""
    lo, hi = sat_bounds(bits)
    x = np.asarray(x, dtype=np.int64)
    return (x < lo) | (x > hi)


def count_saturated(x: np.ndarray, bits: int) -> int:
    """How many elements of ``x`` lie outside the signed ``bits`` range."""
    if x.size == 0:
        return 0
    lo, hi = sat_bounds(bits)
    if x.min() >= lo and x.max() <= hi:   # the usual case: two reductions, no mask
        return 0
    return int(np.count_nonzero((x < lo) | (x > hi)))


def count_saturated_each(x: np.ndarray, bits: int) -> list[int]:
    """How many elements of each ``x[i]`` lie outside the signed ``bits`` range."""
    lo, hi = sat_bounds(bits)
    if x.size == 0 or (x.min() >= lo and x.max() <= hi):
        return [0] * x.shape[0]
    flat = x.reshape(x.shape[0], -1)
    return np.count_nonzero((flat < lo) | (flat > hi), axis=1).tolist()


def shift_round(x: np.ndarray, shift: int | np.ndarray,
                out: np.ndarray | None = None, nonneg: bool = False) -> np.ndarray:
    """Arithmetic right shift by ``shift`` with round half away from zero.

    ``shift`` may be a scalar or an array broadcastable against ``x``; a shift
    of 0 returns ``x`` unchanged.  Negative shifts are rejected: NVDLA's
    shifters are unsigned fields.  For a scalar shift ``s > 0`` the result is
    ``(x + 2**(s-1) - (x < 0)) >> s`` (floor shift): for ``x >= 0`` that is
    ``floor(x / 2**s + 1/2)``, for ``x < 0`` ``ceil(x / 2**s - 1/2)``, i.e. the
    halves go away from zero.  ``out`` may be ``x`` itself (in place).

    ``nonneg`` (scalar shifts): the caller knows ``x >= 0``, so the correction
    for negative values is skipped - or clips negative results to 0 afterwards,
    which needs no correction either: for ``x < 0``, ``(x + 2**(s-1)) >> s <= 0``
    like the exact result, and both become 0.
    """
    x = np.asarray(x, dtype=np.int64)
    if isinstance(shift, (int, np.integer)):
        s = int(shift)
        if s < 0:
            raise ValueError(f"shift must be >= 0, got {shift!r}")
        if s > 62:
            raise ValueError(f"shift must be <= 62 for int64 arithmetic, got {shift!r}")
        if s == 0:
            if out is None or out is x:
                return x
            out[...] = x
            return out
        if nonneg:
            y = np.add(x, 1 << (s - 1), out=out)
            return np.right_shift(y, s, out=y)
        minus_one = np.right_shift(x, 63)     # -1 where x < 0, else 0 (int64, no bools)
        y = np.add(x, 1 << (s - 1), out=out)
        np.add(y, minus_one, out=y)
        return np.right_shift(y, s, out=y)
    sh = np.asarray(shift, dtype=np.int64)
    if np.any(sh < 0):
        raise ValueError(f"shift must be >= 0, got {shift!r}")
    if np.any(sh > 62):
        raise ValueError(f"shift must be <= 62 for int64 arithmetic, got {shift!r}")
    half = np.where(sh > 0, np.left_shift(np.int64(1), np.maximum(sh - 1, 0)), 0)
    y = np.right_shift(x + half - ((x < 0) & (sh > 0)), sh)
    if out is not None:
        out[...] = y
        return out
    return y


def shift_round_int(x: int, shift: int) -> int:
    """:func:`shift_round` of one integer (``shift`` >= 0, ``|x| < 2**63``): the same rule
    written for scalars, which :mod:`accel.cmod.fast.fused` compiles into its element loop.

    >>> [shift_round_int(v, 1) for v in (5, -5, 4, -4)]
    [3, -3, 2, -2]
    """
    # no branch on x, so a compiled loop vectorizes: x >> 63 is -1 for x < 0, else 0
    half = (1 << shift) >> 1          # 2**(shift - 1); 0 for shift 0
    return (x + half + (x >> 63)) >> shift if half else x


def shift_round_sat(x: np.ndarray, shift: int | np.ndarray, bits: int,
                    out: np.ndarray | None = None) -> np.ndarray:
    """Right shift with round half away from zero, then saturate to ``bits``."""
    y = shift_round(x, shift, out=out)
    return saturate(y, bits, out=y if (out is not None or y is not x) else None)


def sign_extend(value: np.ndarray | int, bits: int) -> np.ndarray:
    """Interpret the low ``bits`` of ``value`` as a two's-complement number."""
    v = np.asarray(value, dtype=np.int64) & ((1 << bits) - 1)
    return np.where(v >= (1 << (bits - 1)), v - (1 << bits), v)


def scale_shift_factorize(value: float, scale_bits: int = 16,
                          max_shift: int = 63) -> tuple[int, int]:
    """Factorize a positive real rescale ``value`` as ``scale * 2**-shift``.

    ``scale`` is a signed ``scale_bits`` integer (int16 on NVDLA) chosen with
    as many significant bits as fit, following the NVDLA compiler's rule
    ``shift = (scale_bits - 1) - numbits(value)``, ``scale = trunc(value * 2**shift)``
    (sw umd LowPrecision.h); here the product is rounded to nearest instead of
    truncated, which keeps the relative error below 2**-15.  Raises
    ``ValueError`` when ``value`` is not positive or needs a shift outside
    ``[0, max_shift]``.

    >>> scale_shift_factorize(0.5)
    (16384, 15)
    """
    if not value > 0 or not np.isfinite(value):
        raise ValueError(f"rescale value must be positive and finite, got {value!r}")
    hi = (1 << (scale_bits - 1)) - 1
    # largest shift with value * 2**shift still representable
    shift = int(np.floor(np.log2(hi / value)))
    shift = min(shift, max_shift)
    if shift < 0:
        raise ValueError(
            f"rescale value {value!r} exceeds the int{scale_bits} scale range "
            f"(largest representable {hi})")
    scale = int(round(value * (1 << shift)))
    if scale > hi:  # rounding pushed it over
        shift -= 1
        scale = int(round(value * (1 << shift)))
    if scale == 0:
        raise ValueError(f"rescale value {value!r} underflows a {max_shift}-bit shift")
    return scale, shift
