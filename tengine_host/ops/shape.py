"""Shape: the input's shape as int64, optionally sliced by ``start`` / ``end`` (opset 15)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def _dims(shape: tuple[int, ...], start: int, end: int | None) -> tuple[int, ...]:
    r = len(shape)
    lo = min(max(start + r if start < 0 else start, 0), r)
    hi = r if end is None else min(max(end + r if end < 0 else end, 0), r)
    return tuple(shape[lo:hi])


def shape(x: np.ndarray, *, start: int, end: int | None) -> np.ndarray:
    return np.array(_dims(x.shape, start, end), dtype=np.int64)


def infer_shape(inputs, *, start: int, end: int | None) -> list[tuple[int, ...]]:
    return [(len(_dims(tuple(inputs[0].shape), start, end)),)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    end = attrs.get("end")
    return {"start": int(attrs.get("start", 0)), "end": None if end is None else int(end)}


register("Shape", shape, infer_shape, normalize, infer_dtype=lambda inputs, **_: [np.int64],
         shape_only=True)
