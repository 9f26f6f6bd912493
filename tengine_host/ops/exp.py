"""Exp: elementwise ``numpy.exp``, keeping the input dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def exp(x: np.ndarray) -> np.ndarray:
    return np.exp(x).astype(x.dtype, copy=False)


register("Exp", exp, same_shape)
