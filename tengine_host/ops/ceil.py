"""Ceil: round up elementwise."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def ceil(x: np.ndarray) -> np.ndarray:
    return np.ceil(x).astype(x.dtype, copy=False)


register("Ceil", ceil, same_shape)
