"""Flatten: reshape to 2-D [prod(dims[:axis]), prod(dims[axis:])]."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register


def _split(shape: tuple[int, ...], axis: int) -> tuple[int, int]:
    if not -len(shape) <= axis <= len(shape):
        raise ValueError(f"Flatten axis {axis} out of range for rank {len(shape)}")
    if axis < 0:
        axis += len(shape)
    return int(np.prod(shape[:axis], dtype=np.int64)), int(np.prod(shape[axis:], dtype=np.int64))


def flatten(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    return x.reshape(_split(x.shape, axis))


register("Flatten", flatten, lambda inputs, axis: [_split(inputs[0].shape, axis)],
         lambda attrs, inputs, opset: {"axis": int(attrs.get("axis", 1))})
