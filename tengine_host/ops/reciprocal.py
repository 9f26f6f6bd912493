"""Reciprocal: ``1 / x`` elementwise."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def reciprocal(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.reciprocal(x).astype(x.dtype, copy=False)


register("Reciprocal", reciprocal, same_shape)
