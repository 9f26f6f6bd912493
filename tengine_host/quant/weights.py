"""Per-tensor int8 quantization of activations: a scale, and optionally a zero point.

Weights are quantized per output channel by the NVDLA compiler
(``accel.compiler.quantize``), which the nvdla device exposes to the host.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (NVDLA's rule, unlike numpy's ties-to-even)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_activation(x: np.ndarray, scale: float, zero_point: int = 0) -> np.ndarray:
    """``clip(round_half_away(x / scale) + zero_point, -128, 127)`` as int8 (the
    hardware's range); the code ``zero_point`` stands for 0.

    One compiled pass over ``x``, each value through float64 as the rule is written:
    ``trunc(y + copysign(0.5, y))`` is :func:`round_half_away` of ``y`` (the sum
    rounds as ``|y| + 0.5`` does, by symmetry)."""
    return quantize_counted(x, scale, zero_point)[0]


def quantize_counted(x: np.ndarray, scale: float, zero_point: int = 0
                     ) -> tuple[np.ndarray, int]:
    """:func:`quantize_activation` of ``x`` and how many of its values are NaN or
    infinite (counted in the same pass), for callers that refuse them."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float64)
    out = np.empty(x.shape, dtype=np.int8)
    bad = _quantize(np.ascontiguousarray(x).reshape(-1), float(scale), float(zero_point),
                    out.reshape(-1))
    return out, int(bad)


@njit(cache=True, nogil=True)
def _quantize(x, scale, zero_point, out):
    bad = 0
    for i in range(x.shape[0]):
        v = np.float64(x[i])
        bad += not np.isfinite(v)
        y = v / scale
        y = np.trunc(y + np.copysign(0.5, y)) + zero_point
        out[i] = np.int8(-128.0 if y < -128.0 else (127.0 if y > 127.0 else y))
    return bad


def dequantize(q: np.ndarray, scale: float | np.ndarray, zero_point: int = 0) -> np.ndarray:
    """``(q - zero_point) * scale`` as float32 (exact in float64, then rounded once)."""
    q = np.asarray(q)
    if np.ndim(scale) or q.dtype.kind not in "iu":
        return ((np.asarray(q, dtype=np.float64) - zero_point) * scale).astype(np.float32)
    out = np.empty(q.shape, dtype=np.float32)
    _dequantize(np.ascontiguousarray(q).reshape(-1), float(scale), float(zero_point),
                out.reshape(-1))
    return out


@njit(cache=True, nogil=True)
def _dequantize(q, scale, zero_point, out):
    for i in range(q.shape[0]):
        out[i] = np.float32((np.float64(q[i]) - zero_point) * scale)
