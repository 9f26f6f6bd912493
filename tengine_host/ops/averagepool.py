"""AveragePool (1-D/2-D/3-D): ``ceil_mode``, pads, dilations, auto_pad; the divisor counts
the padded positions with ``count_include_pad=1`` but never the extra positions that
``ceil_mode`` adds past the padding."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register
from tengine_host.ops.windows import geometry, out_shape, windows


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if "kernel_shape" not in attrs:
        raise ValueError("AveragePool needs kernel_shape")
    out = geometry(attrs, tuple(inputs[0].shape[2:]), list(attrs["kernel_shape"]),
                   "AveragePool")
    out.update(ceil_mode=int(attrs.get("ceil_mode", 0)),
               count_include_pad=int(attrs.get("count_include_pad", 0)))
    return out


def infer_shape(inputs, *, kernel_shape, strides, pads, dilations, ceil_mode, **_: Any
                ) -> list[tuple[int, ...]]:
    x = tuple(inputs[0].shape)
    return [(*x[:2], *out_shape(x[2:], kernel_shape, strides, pads, dilations, ceil_mode))]


def average_pool(x: np.ndarray, *, kernel_shape, strides, pads, dilations, ceil_mode,
                 count_include_pad) -> np.ndarray:
    nd = len(kernel_shape)
    geo = dict(kernel_shape=kernel_shape, strides=strides, pads=pads, dilations=dilations,
               ceil_mode=ceil_mode)
    axes = tuple(range(-nd, 0))
    total = windows(x, **geo).sum(axis=axes, dtype=np.float64)
    outs = total.shape[2:]
    # The divisor is a product of per-axis counts (a window is a box): positions inside
    # the input, or inside input + padding with count_include_pad.
    count = np.ones((), np.float64)
    for i in range(nd):
        pos = (np.arange(outs[i])[:, None] * strides[i] - pads[i]
               + np.arange(kernel_shape[i])[None, :] * dilations[i])
        lo, hi = (-pads[i], x.shape[2 + i] + pads[i + nd]) if count_include_pad else (
            0, x.shape[2 + i])
        c = ((pos >= lo) & (pos < hi)).sum(axis=1)
        count = np.multiply.outer(count, c)
    return (total / count).astype(x.dtype)


register("AveragePool", average_pool, infer_shape, normalize)
