"""Unsqueeze: insert size-1 axes at ``axes`` of the output (attribute before opset 13,
input after)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, norm_axis, register


def out_shape(shape: tuple[int, ...], axes) -> tuple[int, ...]:
    rank = len(shape) + len(np.asarray(axes).reshape(-1))
    where = sorted(norm_axis(int(a), rank, "Unsqueeze axis") for a in np.asarray(axes).reshape(-1))
    if len(set(where)) != len(where):
        raise ValueError(f"Unsqueeze axes {list(np.asarray(axes).reshape(-1))} repeat an axis")
    dims = iter(shape)
    return tuple(1 if i in where else next(dims) for i in range(rank))


def unsqueeze(x: np.ndarray, axes_in: np.ndarray | None = None, *, axes=None) -> np.ndarray:
    return x.reshape(out_shape(x.shape, axes if axes_in is None else axes_in))


def infer_shape(inputs, *, axes=None) -> list[tuple[int, ...]]:
    given = const_value(inputs[1], "Unsqueeze axes") if len(inputs) > 1 else None
    if given is None and axes is None:
        raise ValueError("Unsqueeze needs axes")
    return [out_shape(tuple(inputs[0].shape), axes if given is None else given)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"axes": None if "axes" not in attrs else [int(a) for a in attrs["axes"]]}


register("Unsqueeze", unsqueeze, infer_shape, normalize, const_inputs=(1,))
