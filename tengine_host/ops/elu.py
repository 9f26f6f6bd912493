"""Elu: ``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise (alpha 1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def elu(x: np.ndarray, *, alpha: float) -> np.ndarray:
    neg = alpha * np.expm1(np.minimum(x, 0))
    return np.where(x > 0, x, neg).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"alpha": float(attrs.get("alpha", 1.0))}


register("Elu", elu, same_shape, normalize)
