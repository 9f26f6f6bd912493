"""CACC: convolution accumulator - 34-bit saturating sums and clip-truncate.

Partial sums saturate to the signed 34-bit range (``CACC_PARSUM_WIDTH``); at
channel end the sum is shifted right by ``CLIP_TRUNCATE`` with round half away
from zero and saturated to int32; saturated elements are counted in
``D_OUT_SATURATION`` (NVDLA_FACTS section 3).

>>> import numpy as np
>>> out, sat = clip_truncate(np.array([5, -5, 2**40]), 1)
>>> out.tolist(), sat
([3, -3, 2147483647], 1)
"""

from __future__ import annotations

import numpy as np

from accel.arith import count_saturated, saturate, shift_round

PARSUM_BITS = 34
MAX_TRUNCATE = 16  # documented range of CLIP_TRUNCATE; the NVDLA cmod fails above it


def accumulate(psum: np.ndarray, terms: int | None = None) -> np.ndarray:
    """Saturate exact sums of products to the 34-bit accumulator range (in place).

    ``terms`` products of int8 values are at most ``terms * 2**14`` in magnitude:
    below 2**19 terms no sum can leave the range and nothing is done.
    """
    if terms is not None and terms < (1 << (PARSUM_BITS - 1 - 14)):
        return psum
    return saturate(psum, PARSUM_BITS, out=psum)


def fits_int32(terms: int | None) -> bool:
    """Sums of ``terms`` int8 x int8 products always fit int32 (each is at most 2**14 in
    magnitude; a right shift with rounding never makes one larger): nothing to saturate."""
    return terms is not None and terms * (1 << 14) < (1 << 31)


def clip_truncate(acc: np.ndarray, truncate: int, terms: int | None = None
                  ) -> tuple[np.ndarray, int]:
    """``(int32 result, saturation count)`` of the channel-end scaling (overwrites ``acc``).
    ``terms``: products in each sum, when known (see :func:`fits_int32`)."""
    shifted = shift_round(acc, truncate, out=acc)
    if fits_int32(terms):
        return shifted, 0
    sat = count_saturated(shifted, 32)
    return (saturate(shifted, 32, out=shifted) if sat else shifted), sat
