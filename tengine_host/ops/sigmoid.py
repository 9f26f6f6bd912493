"""Sigmoid: 1 / (1 + exp(-x)), computed without overflow for large |x|."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number never overflows: e = exp(-|x|), then 1 / (1 + e) where
    # x >= 0 and e / (1 + e) elsewhere, as one division of the chosen numerator, in place
    # (the same values as both divisions and a select, in half the passes).  The numerator
    # is max(e, 1 where x >= 0 else 0): e <= 1, and NaN stays NaN; a masked copy would
    # take three times as long as this whole function (it branches on each value)
    e = np.abs(x)
    np.negative(e, out=e)
    np.exp(e, out=e)
    d = e + 1
    np.maximum(e, (x >= 0).astype(e.dtype), out=e)
    return np.divide(e, d, out=e)


register("Sigmoid", sigmoid, same_shape)
