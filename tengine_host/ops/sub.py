"""Sub: elementwise difference with multidirectional (numpy) broadcasting."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def sub(a: np.ndarray, b: np.ndarray, **_: Any) -> np.ndarray:
    return np.subtract(a, b).astype(a.dtype, copy=False)


register("Sub", sub, broadcast_shape, min_opset=7)
