"""Split: cut along ``axis`` into given sizes (attribute before opset 13, input after), or
into ``num_outputs`` parts (opset 18: the last part may be smaller), or equal parts."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, norm_axis, register


def sizes(dim: int, split, parts: int) -> list[int]:
    """Sizes of the pieces of an axis of length ``dim``."""
    if split is not None:
        s = [int(v) for v in np.asarray(split).reshape(-1)]
        if sum(s) != dim or any(v < 0 for v in s):
            raise ValueError(f"Split sizes {s} do not add up to the axis length {dim}")
        return s
    chunk = -(-dim // parts)
    out = [min(chunk, max(dim - i * chunk, 0)) for i in range(parts)]
    if sum(out) != dim:
        raise ValueError(f"Split cannot cut length {dim} into {parts} parts")
    return out


def split(x: np.ndarray, split_in: np.ndarray | None = None, *, axis: int, split=None,
          num_outputs: int) -> tuple[np.ndarray, ...]:
    ax = norm_axis(axis, x.ndim, "Split axis")
    s = sizes(x.shape[ax], split if split_in is None else split_in, num_outputs)
    return tuple(np.split(x, np.cumsum(s)[:-1], axis=ax))


def infer_shape(inputs, *, axis: int, split=None, num_outputs: int) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    ax = norm_axis(axis, len(shape), "Split axis")
    given = const_value(inputs[1], "Split split") if len(inputs) > 1 else None
    return [shape[:ax] + (n,) + shape[ax + 1:]
            for n in sizes(shape[ax], split if given is None else given, num_outputs)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    # The node's output count arrives through attrs["_n_outputs"] (set by the importer).
    n = int(attrs.get("num_outputs", attrs.get("_n_outputs", 1)))
    split = attrs.get("split")
    return {"axis": int(attrs.get("axis", 0)), "num_outputs": n,
            "split": None if split is None else [int(v) for v in split]}


register("Split", split, infer_shape, normalize, const_inputs=(1,))
