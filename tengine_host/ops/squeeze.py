"""Squeeze: drop size-1 axes (``axes`` attribute before opset 13, input after; all
size-1 axes when omitted)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, norm_axis, register


def _axes(shape: tuple[int, ...], axes) -> tuple[int, ...]:
    if axes is None:
        return tuple(i for i, d in enumerate(shape) if d == 1)
    out = tuple(sorted({norm_axis(int(a), len(shape), "Squeeze axis")
                        for a in np.asarray(axes).reshape(-1)}))
    bad = [a for a in out if shape[a] != 1]
    if bad:
        raise ValueError(f"Squeeze axes {bad} of shape {shape} are not 1")
    return out


def squeeze(x: np.ndarray, axes_in: np.ndarray | None = None, *, axes=None) -> np.ndarray:
    return np.squeeze(x, axis=_axes(x.shape, axes if axes_in is None else axes_in))


def infer_shape(inputs, *, axes=None) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    given = const_value(inputs[1], "Squeeze axes") if len(inputs) > 1 else None
    drop = _axes(shape, axes if given is None else given)
    return [tuple(d for i, d in enumerate(shape) if i not in drop)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"axes": None if "axes" not in attrs else [int(a) for a in attrs["axes"]]}


register("Squeeze", squeeze, infer_shape, normalize, const_inputs=(1,))
