"""Expand: broadcast the input with a target shape (bidirectionally, like numpy)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import const_value, register


def _out(shape: tuple[int, ...], target: np.ndarray) -> tuple[int, ...]:
    tgt = tuple(int(d) for d in np.asarray(target).reshape(-1))
    try:
        return tuple(int(d) for d in np.broadcast_shapes(shape, tgt))
    except ValueError:
        raise ValueError(f"Expand cannot broadcast {shape} with {list(tgt)}") from None


def expand(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    return np.array(np.broadcast_to(x, _out(x.shape, shape)))


def infer_shape(inputs, **_) -> list[tuple[int, ...]]:
    return [_out(tuple(inputs[0].shape), const_value(inputs[1], "Expand shape"))]


register("Expand", expand, infer_shape, min_opset=8, const_inputs=(1,))
