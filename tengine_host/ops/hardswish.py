"""HardSwish: x * max(0, min(1, x / 6 + 1 / 2)) (opset 14).

``channel_scale`` (not an ONNX attribute) multiplies output channel ``c`` (axis
1) by ``channel_scale[c]``: channel-group equalization
(:mod:`tengine_host.quant.equalize_groups`) evens a HardSwish output's channel
ranges so, its readers' weights taking the inverse.
"""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def hard_swish(x: np.ndarray, channel_scale: np.ndarray | None = None) -> np.ndarray:
    y = x * np.clip(x * np.float32(1 / 6) + np.float32(0.5), 0, 1)
    if channel_scale is not None:
        y = y * np.asarray(channel_scale, x.dtype).reshape(1, -1, *([1] * (x.ndim - 2)))
    return y.astype(x.dtype, copy=False)


register("HardSwish", hard_swish, same_shape)
