"""Clip: min(max(x, lo), hi); bounds are attributes before opset 11, optional inputs after."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def clip(x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None, *,
         min: float | None = None, max: float | None = None) -> np.ndarray:  # noqa: A002
    lo = min if lo is None else lo
    hi = max if hi is None else hi
    y = x
    if lo is not None:
        y = np.maximum(y, np.asarray(lo, x.dtype))
    if hi is not None:
        y = np.minimum(y, np.asarray(hi, x.dtype))
    return np.asarray(y, dtype=x.dtype)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if opset >= 11:
        return {"min": None, "max": None}
    return {"min": float(attrs.get("min", -np.inf)), "max": float(attrs.get("max", np.inf))}


register("Clip", clip, same_shape, normalize)
