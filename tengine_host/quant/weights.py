"""Symmetric int8 quantization of weights (per output channel) and activations (per tensor)."""

from __future__ import annotations

import numpy as np


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (NVDLA's rule, unlike numpy's ties-to-even)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def weight_scales(w: np.ndarray) -> np.ndarray:
    """Per-output-channel scales ``max|w_k| / 127`` over every axis but the first.

    An all-zero channel gets scale ``1/127`` (it quantizes to zeros either way).
    """
    w = np.asarray(w, dtype=np.float64)
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
    return np.where(amax > 0, amax, 1.0) / 127.0


def quantize_weights(w: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``clip(round_half_away(w / s_k), -127, 127)`` as int8, ``s_k`` along axis 0."""
    w = np.asarray(w, dtype=np.float64)
    s = np.asarray(scales, dtype=np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
    return np.clip(round_half_away(w / s), -127, 127).astype(np.int8)


def quantize_activation(x: np.ndarray, scale: float) -> np.ndarray:
    """``clip(round_half_away(x / scale), -128, 127)`` as int8 (the hardware's range)."""
    return np.clip(round_half_away(np.asarray(x, dtype=np.float64) / scale), -128, 127
                   ).astype(np.int8)


def dequantize(q: np.ndarray, scale: float | np.ndarray) -> np.ndarray:
    """``q * scale`` as float32."""
    return (np.asarray(q, dtype=np.float64) * scale).astype(np.float32)
