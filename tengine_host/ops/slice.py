"""Slice: ``starts`` / ``ends`` / ``axes`` / ``steps`` (attributes before opset 10,
inputs after), clamped as ONNX specifies; negative steps walk backwards."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, norm_axis, register


def slices(shape: tuple[int, ...], starts, ends, axes, steps) -> tuple[slice, ...]:
    """The numpy index equivalent to the ONNX slice parameters."""
    starts = [int(v) for v in np.asarray(starts).reshape(-1)]
    ends = [int(v) for v in np.asarray(ends).reshape(-1)]
    n = len(starts)
    axes = list(range(n)) if axes is None else [int(v) for v in np.asarray(axes).reshape(-1)]
    steps = [1] * n if steps is None else [int(v) for v in np.asarray(steps).reshape(-1)]
    if not len(ends) == len(axes) == len(steps) == n:
        raise ValueError(f"Slice starts {starts}, ends {ends}, axes {axes}, steps {steps} "
                         f"differ in length")
    index = [slice(None)] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        ax = norm_axis(a, len(shape), "Slice axis")
        d = shape[ax]
        if st == 0:
            raise ValueError("Slice step 0")
        s = s + d if s < 0 else s
        e = e + d if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        # e == -1 means "past the front" here, which numpy spells None.
        index[ax] = slice(s, None if e < 0 else e, st)
    return tuple(index)


def slice_(x: np.ndarray, starts_in=None, ends_in=None, axes_in=None, steps_in=None, *,
           starts=None, ends=None, axes=None) -> np.ndarray:
    if starts_in is not None:
        starts, ends, axes = starts_in, ends_in, axes_in
    return np.ascontiguousarray(x[slices(x.shape, starts, ends, axes, steps_in)])


def infer_shape(inputs, *, starts=None, ends=None, axes=None) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    vals = [const_value(inputs[i], f"Slice {w}") if len(inputs) > i else None
            for i, w in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps"))]
    if vals[0] is not None:
        starts, ends, axes = vals[:3]
    idx = slices(shape, starts, ends, axes, vals[3])
    return [tuple(len(range(*sl.indices(d))) for sl, d in zip(idx, shape, strict=True))]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {k: attrs.get(k) for k in ("starts", "ends", "axes")}


register("Slice", slice_, infer_shape, normalize, const_inputs=(1, 2, 3, 4))
