"""HardSwish: x * max(0, min(1, x / 6 + 1 / 2)) (opset 14)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def hard_swish(x: np.ndarray) -> np.ndarray:
    return (x * np.clip(x * np.float32(1 / 6) + np.float32(0.5), 0, 1)).astype(x.dtype, copy=False)


register("HardSwish", hard_swish, same_shape)
