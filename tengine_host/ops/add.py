"""Add: elementwise sum with numpy (multidirectional ONNX) broadcasting."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import apply_activation, register


def add(a: np.ndarray, b: np.ndarray, *, activation: str | None = None, **_: Any) -> np.ndarray:
    return apply_activation(np.add(a, b), activation)


def infer_shape(inputs, **_: Any) -> list[tuple[int, ...]]:
    try:
        return [tuple(np.broadcast_shapes(inputs[0].shape, inputs[1].shape))]
    except ValueError:
        raise ValueError(f"Add cannot broadcast shapes {inputs[0].shape} and "
                         f"{inputs[1].shape}") from None


register("Add", add, infer_shape, min_opset=7)
