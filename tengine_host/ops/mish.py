"""Mish: ``x * tanh(softplus(x))`` (YOLOv4's activation; an op from opset 18)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def mish(x: np.ndarray) -> np.ndarray:
    return (x * np.tanh(np.logaddexp(x, np.zeros((), x.dtype)))).astype(x.dtype, copy=False)


register("Mish", mish, same_shape, min_opset=18)
