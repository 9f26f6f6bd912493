"""Softplus: ``log(exp(x) + 1)``, computed without overflow."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(x, np.zeros((), x.dtype)).astype(x.dtype, copy=False)


register("Softplus", softplus, same_shape)
