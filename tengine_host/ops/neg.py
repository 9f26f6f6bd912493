"""Neg: elementwise negation, keeping the input dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def neg(x: np.ndarray) -> np.ndarray:
    return np.negative(x).astype(x.dtype, copy=False)


register("Neg", neg, same_shape)
