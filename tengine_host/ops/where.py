"""Where: ``x`` where the condition holds, ``y`` elsewhere, with broadcasting."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def where(cond: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(cond.astype(bool), x, y).astype(x.dtype, copy=False)


register("Where", where, broadcast_shape, min_opset=9,
         infer_dtype=lambda inputs, **_: [inputs[1].dtype])
