"""Floor: round down elementwise."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def floor(x: np.ndarray) -> np.ndarray:
    return np.floor(x).astype(x.dtype, copy=False)


register("Floor", floor, same_shape)
