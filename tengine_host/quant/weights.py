"""Symmetric per-tensor int8 quantization of activations.

Weights are quantized per output channel by the NVDLA compiler
(``accel.compiler.quantize``), which the nvdla device exposes to the host.
"""

from __future__ import annotations

import numpy as np


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (NVDLA's rule, unlike numpy's ties-to-even)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_activation(x: np.ndarray, scale: float) -> np.ndarray:
    """``clip(round_half_away(x / scale), -128, 127)`` as int8 (the hardware's range).

    In place on one float64 array: ``trunc(y + copysign(0.5, y))`` is
    :func:`round_half_away` of ``y`` (the sum rounds as ``|y| + 0.5`` does, by
    symmetry), in four passes instead of its six."""
    y = np.divide(x, scale, dtype=np.float64)
    np.add(y, np.copysign(0.5, y), out=y)
    np.trunc(y, out=y)
    return np.clip(y, -128, 127, out=y).astype(np.int8)


def dequantize(q: np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """``q * scale`` as float32."""
    return (np.asarray(q, dtype=np.float64) * scale).astype(np.float32)
