"""Sign: -1, 0 or 1 elementwise, in the input's dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def sign(x: np.ndarray) -> np.ndarray:
    return np.sign(x).astype(x.dtype, copy=False)


register("Sign", sign, same_shape)
