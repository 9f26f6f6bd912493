"""PRelu: x for x >= 0, slope * x otherwise; the slope broadcasts to x (opset 7+)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * slope).astype(x.dtype, copy=False)


def infer_shape(inputs, **_) -> list[tuple[int, ...]]:
    x, s = inputs[0].shape, inputs[1].shape
    try:
        if np.broadcast_shapes(x, s) != tuple(x):
            raise ValueError
    except ValueError:
        raise ValueError(f"PRelu slope {s} does not broadcast to the input {x}") from None
    return same_shape(inputs)


register("PRelu", prelu, infer_shape, min_opset=7)
