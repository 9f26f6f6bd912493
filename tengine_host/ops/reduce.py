"""Shared axis handling of the Reduce* ops (not an op: registers nothing)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, norm_axis


def _axes(rank: int, axes, noop: int) -> tuple[int, ...] | None:
    """Axes to reduce; ``None`` means "no reduction" (empty axes with noop_with_empty_axes)."""
    if axes is None or np.asarray(axes).size == 0:
        return None if noop else tuple(range(rank))
    return tuple(sorted({norm_axis(int(a), rank, "reduce axis")
                         for a in np.asarray(axes).reshape(-1)}))


def reduce_with(fn: Callable[..., np.ndarray], x: np.ndarray, axes_in, *, axes=None,
                keepdims: int, noop_with_empty_axes: int) -> np.ndarray:
    ax = _axes(x.ndim, axes if axes_in is None else axes_in, noop_with_empty_axes)
    if ax is None:
        return x
    acc = np.float64 if np.issubdtype(x.dtype, np.floating) else None
    return np.asarray(fn(x, axis=ax, keepdims=bool(keepdims), dtype=acc)).astype(x.dtype)


def reduce_infer_shape(inputs, *, axes=None, keepdims: int, noop_with_empty_axes: int
                       ) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    given = const_value(inputs[1], "reduce axes") if len(inputs) > 1 else None
    ax = _axes(len(shape), axes if given is None else given, noop_with_empty_axes)
    if ax is None:
        return [shape]
    if keepdims:
        return [tuple(1 if i in ax else d for i, d in enumerate(shape))]
    return [tuple(d for i, d in enumerate(shape) if i not in ax)]


def reduce_normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    axes = attrs.get("axes")
    return {"axes": None if axes is None else [int(a) for a in axes],
            "keepdims": int(attrs.get("keepdims", 1)),
            "noop_with_empty_axes": int(attrs.get("noop_with_empty_axes", 0))}


def _extreme(dtype: np.dtype, lowest: bool):
    """The identity of a maximum (``lowest``) or minimum over ``dtype``: what an empty set
    reduces to."""
    if dtype == np.dtype(bool):
        return not lowest
    if np.issubdtype(dtype, np.floating):
        return -np.inf if lowest else np.inf
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


def extreme_reduction(fn: Callable[..., np.ndarray], lowest: bool) -> Callable[..., np.ndarray]:
    """ReduceMax (``fn`` ``np.max``, ``lowest``) or ReduceMin's op function: ``fn`` over
    the axes :func:`reduce_with` resolves, an empty set giving the identity."""
    def reduce(x: np.ndarray, axes_in: np.ndarray | None = None, **attrs) -> np.ndarray:
        return reduce_with(lambda v, axis, keepdims, dtype=None: fn(
            v, axis=axis, keepdims=keepdims, initial=_extreme(v.dtype, lowest)),
            x, axes_in, **attrs)
    return reduce
