"""Abs: elementwise absolute value, keeping the input dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def abs_(x: np.ndarray) -> np.ndarray:
    return np.abs(x).astype(x.dtype, copy=False)


register("Abs", abs_, same_shape)
