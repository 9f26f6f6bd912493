"""Tanh: elementwise ``numpy.tanh``, keeping the input dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x).astype(x.dtype, copy=False)


register("Tanh", tanh, same_shape)
