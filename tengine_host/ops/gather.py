"""Gather: ``numpy.take`` along ``axis``; negative indices count from the end."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import norm_axis, register


def gather(data: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    ax = norm_axis(axis, data.ndim, "Gather axis")
    n = data.shape[ax]
    idx = np.asarray(indices).astype(np.int64)
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"Gather indices outside [{-n}, {n - 1}] on axis {axis}")
    return np.take(data, np.where(idx < 0, idx + n, idx), axis=ax)


def infer_shape(inputs, *, axis: int) -> list[tuple[int, ...]]:
    d, i = tuple(inputs[0].shape), tuple(inputs[1].shape)
    ax = norm_axis(axis, len(d), "Gather axis")
    return [d[:ax] + i + d[ax + 1:]]


register("Gather", gather, infer_shape, lambda a, i, o: {"axis": int(a.get("axis", 0))})
