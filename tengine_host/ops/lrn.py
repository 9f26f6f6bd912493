"""LRN: ``x / (bias + alpha / size * sum(x^2 over nearby channels)) ** beta``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def lrn(x: np.ndarray, *, size: int, alpha: float, beta: float, bias: float) -> np.ndarray:
    c = x.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = x.astype(np.float64) ** 2
    # Window sums over channels from one cumulative sum (no loop per channel).
    cs = np.concatenate([np.zeros_like(sq[:, :1]), np.cumsum(sq, axis=1)], axis=1)
    idx = np.arange(c)
    top = np.minimum(idx + hi + 1, c)
    bottom = np.maximum(idx - lo, 0)
    window = np.take(cs, top, axis=1) - np.take(cs, bottom, axis=1)
    return (x / (bias + alpha / size * window) ** beta).astype(x.dtype)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if "size" not in attrs:
        raise ValueError("LRN needs a size attribute")
    return {"size": int(attrs["size"]), "alpha": float(attrs.get("alpha", 1e-4)),
            "beta": float(attrs.get("beta", 0.75)), "bias": float(attrs.get("bias", 1.0))}


register("LRN", lrn, same_shape, normalize)
