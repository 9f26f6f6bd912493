"""ConstantOfShape: a tensor of the given shape filled with ``value`` (float32 0 by default)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, register


def constant_of_shape(shape: np.ndarray, *, value: np.ndarray) -> np.ndarray:
    return np.full(tuple(int(d) for d in np.asarray(shape).reshape(-1)), value.reshape(-1)[0],
                   dtype=value.dtype)


def infer_shape(inputs, *, value: np.ndarray) -> list[tuple[int, ...]]:
    dims = tuple(int(d) for d in const_value(inputs[0], "ConstantOfShape shape").reshape(-1))
    if any(d < 0 for d in dims):
        raise ValueError(f"ConstantOfShape shape {list(dims)} has a negative dimension")
    return [dims]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    value = np.asarray(attrs.get("value", np.zeros(1, np.float32)))
    if value.size != 1:
        raise ValueError(f"ConstantOfShape value must hold one element, has {value.size}")
    return {"value": value}


register("ConstantOfShape", constant_of_shape, infer_shape, normalize, min_opset=9,
         infer_dtype=lambda inputs, *, value: [value.dtype], const_inputs=(0,))
