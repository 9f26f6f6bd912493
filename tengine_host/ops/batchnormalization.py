"""BatchNormalization: inference form ``scale * (x - mean) / sqrt(var + eps) + bias`` over
axis 1; with ``training_mode`` (opset 14) the batch statistics are used and the updated
running mean / variance are returned too."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def batch_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
               var: np.ndarray, *, epsilon: float, momentum: float, training_mode: int
               ) -> np.ndarray | tuple[np.ndarray, ...]:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if training_mode:
        axes = (0, *range(2, x.ndim))
        bmean = x.mean(axis=axes, dtype=np.float64)
        bvar = x.var(axis=axes, dtype=np.float64)
        y = _apply(x, scale, bias, bmean, bvar, epsilon, shape)
        run_mean = (mean * momentum + bmean * (1 - momentum)).astype(mean.dtype)
        run_var = (var * momentum + bvar * (1 - momentum)).astype(var.dtype)
        return y, run_mean, run_var
    return _apply(x, scale, bias, mean, var, epsilon, shape)


def _apply(x, scale, bias, mean, var, eps, shape) -> np.ndarray:
    k = (scale / np.sqrt(var.astype(np.float64) + eps)).astype(np.float32)
    b = (bias - mean * k).astype(np.float32)
    return (x * k.reshape(shape) + b.reshape(shape)).astype(x.dtype, copy=False)


def infer_shape(inputs, **_: Any) -> list[tuple[int, ...]]:
    x = tuple(inputs[0].shape)
    for t, what in zip(inputs[1:5], ("scale", "B", "mean", "var"), strict=False):
        if t is None or tuple(t.shape) != (x[1],):
            raise ValueError(f"BatchNormalization {what} must have shape ({x[1]},), got "
                             f"{None if t is None else t.shape}")
    return [x, (x[1],), (x[1],)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if opset < 9 and int(attrs.get("spatial", 1)) != 1:
        raise ValueError("BatchNormalization spatial=0 is not supported")
    return {"epsilon": float(attrs.get("epsilon", 1e-5)),
            "momentum": float(attrs.get("momentum", 0.9)),
            "training_mode": int(attrs.get("training_mode", 0))}


register("BatchNormalization", batch_norm, infer_shape, normalize)
