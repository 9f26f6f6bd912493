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
    """``clip(round_half_away(x / scale), -128, 127)`` as int8 (the hardware's range)."""
    return np.clip(round_half_away(np.asarray(x, dtype=np.float64) / scale), -128, 127
                   ).astype(np.int8)


def dequantize(q: np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """``q * scale`` as float32."""
    return (np.asarray(q, dtype=np.float64) * scale).astype(np.float32)
