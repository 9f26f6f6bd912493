"""GlobalAveragePool: mean over every spatial axis, kept as size-1 axes."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register


def global_average_pool(x: np.ndarray) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    return x.mean(axis=axes, keepdims=True, dtype=np.float64).astype(x.dtype)


def infer_shape(inputs, **_) -> list[tuple[int, ...]]:
    s = tuple(inputs[0].shape)
    return [s[:2] + (1,) * (len(s) - 2)]


register("GlobalAveragePool", global_average_pool, infer_shape)
