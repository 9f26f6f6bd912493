"""HardSwish: x * max(0, min(1, x / 6 + 1 / 2)) (opset 14).

``input_scale`` and ``channel_scale`` (not ONNX attributes) give channel ``c``
(axis 1) ``channel_scale[c] * HardSwish(input_scale[c] * x)``: channel-group
equalization (:mod:`tengine_host.quant.equalize_groups`) evens the ranges of a
HardSwish's input and output channels so, the layers around it taking the
inverse.
"""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import per_channel, register, same_shape


def hard_swish(x: np.ndarray, input_scale: np.ndarray | None = None,
               channel_scale: np.ndarray | None = None) -> np.ndarray:
    u = x if input_scale is None else x * per_channel(input_scale, x)
    y = u * np.clip(u * np.float32(1 / 6) + np.float32(0.5), 0, 1)
    if channel_scale is not None:
        y = y * per_channel(channel_scale, y)
    return y.astype(x.dtype, copy=False)


register("HardSwish", hard_swish, same_shape)
