"""LeakyRelu: x for x >= 0, alpha * x otherwise (alpha defaults to 0.01)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def leaky_relu(x: np.ndarray, *, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"alpha": float(attrs.get("alpha", 0.01))}


register("LeakyRelu", leaky_relu, same_shape, normalize)
