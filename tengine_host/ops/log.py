"""Log: elementwise ``numpy.log``, keeping the input dtype."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def log(x: np.ndarray) -> np.ndarray:
    return np.log(x).astype(x.dtype, copy=False)


register("Log", log, same_shape)
