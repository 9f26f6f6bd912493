"""Sigmoid: 1 / (1 + exp(-x)), computed without overflow for large |x|."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a non-positive number never overflows: split on the sign.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


register("Sigmoid", sigmoid, same_shape)
