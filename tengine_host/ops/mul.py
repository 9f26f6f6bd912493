"""Mul: elementwise product with multidirectional (numpy) broadcasting."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def mul(a: np.ndarray, b: np.ndarray, **_: Any) -> np.ndarray:
    return np.multiply(a, b).astype(a.dtype, copy=False)


register("Mul", mul, broadcast_shape, min_opset=7)
