"""Clip: min(max(x, lo), hi); bounds are attributes before opset 11, optional inputs after."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def clip(x: np.ndarray, lo: np.ndarray | None = None, hi: np.ndarray | None = None, *,
         min: float | None = None, max: float | None = None) -> np.ndarray:  # noqa: A002
    lo = min if lo is None else lo
    hi = max if hi is None else hi
    if lo is None and hi is None:
        return x.copy()
    # One np.clip pass is several times faster than maximum followed by minimum.
    lo = None if lo is None else np.asarray(lo, x.dtype)
    hi = None if hi is None else np.asarray(hi, x.dtype)
    return np.clip(x, lo, hi).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if opset >= 11:
        return {"min": None, "max": None}
    return {"min": float(attrs.get("min", -np.inf)), "max": float(attrs.get("max", np.inf))}


register("Clip", clip, same_shape, normalize)
