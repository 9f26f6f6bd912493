"""GlobalMaxPool: maximum over every spatial axis, kept as size-1 axes."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register


def global_max_pool(x: np.ndarray) -> np.ndarray:
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


def infer_shape(inputs, **_) -> list[tuple[int, ...]]:
    s = tuple(inputs[0].shape)
    return [s[:2] + (1,) * (len(s) - 2)]


register("GlobalMaxPool", global_max_pool, infer_shape)
