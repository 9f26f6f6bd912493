"""Selu: ``gamma * x`` for ``x > 0``, ``gamma * alpha * (exp(x) - 1)`` otherwise
(ONNX's defaults: the self-normalising constants)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def selu(x: np.ndarray, *, alpha: float, gamma: float) -> np.ndarray:
    neg = alpha * np.expm1(np.minimum(x, 0))
    return (gamma * np.where(x > 0, x, neg)).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"alpha": float(attrs.get("alpha", 1.67326319217681884765625)),
            "gamma": float(attrs.get("gamma", 1.05070102214813232421875))}


register("Selu", selu, same_shape, normalize)
