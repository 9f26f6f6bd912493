"""Range: ``start, start + delta, ...`` up to (excluding) ``limit``, in the inputs' dtype."""

from __future__ import annotations

import math

import numpy as np

from tengine_host.ops.registry import const_value, register


def _count(start, limit, delta) -> int:
    if delta == 0:
        raise ValueError("Range delta is 0")
    return max(math.ceil((float(limit) - float(start)) / float(delta)), 0)


def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    n = _count(start, limit, delta)
    # Accumulate in the output dtype, as ONNX's definition (start + i * delta) does.
    return (np.asarray(start) + np.arange(n).astype(np.asarray(start).dtype)
            * np.asarray(delta)).astype(np.asarray(start).dtype)


def infer_shape(inputs, **_) -> list[tuple[int, ...]]:
    vals = [const_value(t, f"Range {w}") for t, w in zip(inputs, ("start", "limit", "delta"),
                                                         strict=True)]
    return [(_count(*vals),)]


register("Range", range_, infer_shape, min_opset=11, const_inputs=(0, 1, 2))
