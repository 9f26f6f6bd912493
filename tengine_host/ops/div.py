"""Div: elementwise quotient with broadcasting; integers truncate toward zero (C semantics)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def div(a: np.ndarray, b: np.ndarray, **_: Any) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        # numpy's // floors; ONNX integer division truncates like C.
        q = np.abs(a).astype(np.int64) // np.abs(b).astype(np.int64)
        return (q * (np.sign(a) * np.sign(b))).astype(a.dtype)
    return np.divide(a, b).astype(a.dtype, copy=False)


register("Div", div, broadcast_shape, min_opset=7)
