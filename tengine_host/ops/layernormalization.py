"""LayerNormalization (opset 17): normalised over the axes from ``axis`` on, then scaled
and shifted; the optional outputs are the mean and the inverse standard deviation."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import norm_axis, register


def layer_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None, *,
                        axis: int, epsilon: float, stash_type: int
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ax = norm_axis(axis, x.ndim)
    axes = tuple(range(ax, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    inv_std = 1 / np.sqrt(x64.var(axis=axes, keepdims=True) + epsilon)
    y = (x64 - mean) * inv_std * scale
    if bias is not None:
        y = y + bias
    stash = np.float32 if stash_type == 1 else x.dtype
    return y.astype(x.dtype), mean.astype(stash), inv_std.astype(stash)


def infer_shape(inputs, *, axis: int, **_: Any) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    ax = norm_axis(axis, len(shape))
    stats = shape[:ax] + (1,) * (len(shape) - ax)
    return [shape, stats, stats]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"axis": int(attrs.get("axis", -1)), "epsilon": float(attrs.get("epsilon", 1e-5)),
            "stash_type": int(attrs.get("stash_type", 1))}


def infer_dtype(inputs, *, stash_type: int, **_: Any) -> list[np.dtype]:
    stash = np.dtype(np.float32) if stash_type == 1 else inputs[0].dtype
    return [inputs[0].dtype, stash, stash]


register("LayerNormalization", layer_normalization, infer_shape, normalize, min_opset=17,
         infer_dtype=infer_dtype)
