"""Pow: ``a ** b`` with broadcasting; the result keeps the base's dtype (opset 12+ allows
mixed base/exponent types)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def pow_(a: np.ndarray, b: np.ndarray, **_: Any) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer):
        return np.power(a.astype(np.int64), b.astype(np.int64)).astype(a.dtype)
    # a negative base with a fractional exponent is NaN, as in ONNX; not worth a warning
    with np.errstate(invalid="ignore"):
        return np.power(a, b).astype(a.dtype)


register("Pow", pow_, broadcast_shape, min_opset=7)
