"""Reshape (opset 5+): target shape from a constant input; 0 copies a dim, -1 is inferred."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def target_shape(in_shape: tuple[int, ...], shape: np.ndarray, allowzero: int = 0
                 ) -> tuple[int, ...]:
    """Resolve ONNX's ``0`` (copy, unless ``allowzero``) and ``-1`` (inferred) entries."""
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    if not allowzero:
        dims = [in_shape[i] if d == 0 else d for i, d in enumerate(dims)]
    total = int(np.prod(in_shape, dtype=np.int64))
    if dims.count(-1) > 1:
        raise ValueError(f"Reshape target {dims} has more than one -1")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        dims[dims.index(-1)] = total // known if known else 0
    if int(np.prod(dims, dtype=np.int64)) != total:
        raise ValueError(f"Reshape cannot turn {in_shape} into {dims}")
    return tuple(dims)


def reshape(x: np.ndarray, shape: np.ndarray, *, allowzero: int = 0) -> np.ndarray:
    return x.reshape(target_shape(x.shape, shape, allowzero))


def infer_shape(inputs, *, allowzero: int = 0) -> list[tuple[int, ...]]:
    if inputs[1] is None or inputs[1].data is None:
        raise ValueError("Reshape needs a constant shape input for static shape inference")
    return [target_shape(inputs[0].shape, inputs[1].data, allowzero)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"allowzero": int(attrs.get("allowzero", 0))}


register("Reshape", reshape, infer_shape, normalize, min_opset=5, const_inputs=(1,))
