"""InstanceNormalization: each sample's each channel normalised over its spatial axes,
then scaled and shifted per channel (style transfer, GAN generators)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register, same_shape


def instance_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                           epsilon: float) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = x64.var(axis=axes, keepdims=True)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x64 - mean) / np.sqrt(var + epsilon) * scale.reshape(shape) + bias.reshape(shape)
    return y.astype(x.dtype)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"epsilon": float(attrs.get("epsilon", 1e-5))}


register("InstanceNormalization", instance_normalization, same_shape, normalize, min_opset=6)
