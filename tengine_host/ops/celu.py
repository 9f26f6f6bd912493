"""Celu: ``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`` (alpha 1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def celu(x: np.ndarray, *, alpha: float) -> np.ndarray:
    return (np.maximum(x, 0) + np.minimum(0, alpha * np.expm1(np.minimum(x, 0) / alpha))
            ).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"alpha": float(attrs.get("alpha", 1.0))}


register("Celu", celu, same_shape, normalize, min_opset=12)
