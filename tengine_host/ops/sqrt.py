"""Sqrt: elementwise ``numpy.sqrt``, keeping the input dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def sqrt(x: np.ndarray) -> np.ndarray:
    return np.sqrt(x).astype(x.dtype, copy=False)


register("Sqrt", sqrt, same_shape)
