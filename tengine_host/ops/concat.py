"""Concat: join inputs along ``axis`` (negative counts from the end)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import norm_axis, register


def concat(*xs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(xs, axis=axis)


def infer_shape(inputs, *, axis: int) -> list[tuple[int, ...]]:
    shapes = [tuple(t.shape) for t in inputs if t is not None]
    ax = norm_axis(axis, len(shapes[0]), "Concat axis")
    for s in shapes[1:]:
        if len(s) != len(shapes[0]) or s[:ax] + s[ax + 1:] != shapes[0][:ax] + shapes[0][ax + 1:]:
            raise ValueError(f"Concat inputs {shapes} differ outside axis {axis}")
    out = list(shapes[0])
    out[ax] = sum(s[ax] for s in shapes)
    return [tuple(out)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if "axis" not in attrs and opset >= 4:
        raise ValueError("Concat needs an axis attribute")
    return {"axis": int(attrs.get("axis", 1))}


register("Concat", concat, infer_shape, normalize)
