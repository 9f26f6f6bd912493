"""Swish: x * sigmoid(alpha * x) (opset 24; alpha defaults to 1, where it is SiLU).

:mod:`tengine_host.passes.match_swish` also builds it from ``Mul(x, Sigmoid(x))``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape
from tengine_host.ops.sigmoid import sigmoid


def swish(x: np.ndarray, *, alpha: float) -> np.ndarray:
    return (x * sigmoid(x * np.asarray(alpha, x.dtype))).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"alpha": float(attrs.get("alpha", 1.0))}


register("Swish", swish, same_shape, normalize)
