"""Add: elementwise sum with numpy (multidirectional ONNX) broadcasting."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import apply_activation, per_channel, register


def add(a: np.ndarray, b: np.ndarray, *, activation: str | None = None,
        activation_max: float | None = None, activation_slope: np.ndarray | None = None,
        activation_alpha: float | None = None, input_scale: np.ndarray | None = None,
        **_: Any) -> np.ndarray:
    """``a + b``, then the activation a pass fused into the sum (Relu, PRelu, LeakyRelu).

    ``input_scale`` (not an ONNX attribute) multiplies channel ``c`` (axis 1) of ``a``
    by ``input_scale[c]`` first: channel-group equalization
    (:mod:`tengine_host.quant.equalize_groups`) gives a residual stream's tensors
    their own channel scales so, the sum converting between them."""
    if input_scale is not None:
        a = a * per_channel(input_scale, a)
    return apply_activation(np.add(a, b), activation, activation_max,
                            activation_slope=activation_slope, activation_alpha=activation_alpha)


def infer_shape(inputs, **_: Any) -> list[tuple[int, ...]]:
    try:
        return [tuple(np.broadcast_shapes(inputs[0].shape, inputs[1].shape))]
    except ValueError:
        raise ValueError(f"Add cannot broadcast shapes {inputs[0].shape} and "
                         f"{inputs[1].shape}") from None


register("Add", add, infer_shape, min_opset=7)
