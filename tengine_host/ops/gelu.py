"""Gelu (opset 20): ``x * Phi(x)``, exactly (``erf``) or by the tanh approximation."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def gelu(x: np.ndarray, *, approximate: str) -> np.ndarray:
    if approximate == "tanh":
        inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype, copy=False)
    from scipy.special import erf  # imported on first use: scipy loads slowly

    return (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    approximate = attrs.get("approximate", "none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate not in ("none", "tanh"):
        raise ValueError(f"Gelu approximate={approximate!r}: allowed 'none' or 'tanh'")
    return {"approximate": approximate}


register("Gelu", gelu, same_shape, normalize, min_opset=20)
