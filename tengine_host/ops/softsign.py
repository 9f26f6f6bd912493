"""Softsign: ``x / (1 + |x|)``."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def softsign(x: np.ndarray) -> np.ndarray:
    return (x / (1 + np.abs(x))).astype(x.dtype, copy=False)


register("Softsign", softsign, same_shape)
