"""Shared registration of the comparison ops (not an op: registers nothing itself):
bool results with numpy (multidirectional ONNX) broadcasting."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def bool_dtype(inputs, **_) -> list[np.dtype]:
    return [np.dtype(bool)]


def register_comparison(op_type: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]
                        ) -> None:
    """Register ``op_type`` as ``fn(a, b)``, bool, broadcast (opset 7 on)."""
    register(op_type, lambda a, b: np.asarray(fn(a, b)), broadcast_shape, min_opset=7,
             infer_dtype=bool_dtype)
