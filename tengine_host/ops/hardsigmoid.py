"""HardSigmoid: max(0, min(1, alpha * x + beta)), alpha 0.2 and beta 0.5 by default."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def hard_sigmoid(x: np.ndarray, *, alpha: float, beta: float) -> np.ndarray:
    return np.clip(x * np.float32(alpha) + np.float32(beta), 0, 1).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"alpha": float(attrs.get("alpha", 0.2)), "beta": float(attrs.get("beta", 0.5))}


register("HardSigmoid", hard_sigmoid, same_shape, normalize)
