"""ArgMax: int64 index of the largest value along ``axis`` (the first of equal ones, or
the last with ``select_last_index``); shared with ArgMin (:mod:`.argmin`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import norm_axis, register


def arg_extreme(x: np.ndarray, *, axis: int, keepdims: int, select_last_index: int,
                pick=np.argmax) -> np.ndarray:
    ax = norm_axis(axis, x.ndim)
    if select_last_index:
        idx = x.shape[ax] - 1 - pick(np.flip(x, axis=ax), axis=ax)
    else:
        idx = pick(x, axis=ax)
    idx = np.asarray(idx, dtype=np.int64)
    return np.expand_dims(idx, ax) if keepdims else idx


def arg_max(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return arg_extreme(x, **attrs, pick=np.argmax)


def arg_normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return {"axis": int(attrs.get("axis", 0)), "keepdims": int(attrs.get("keepdims", 1)),
            "select_last_index": int(attrs.get("select_last_index", 0))}


def arg_infer_shape(inputs, *, axis: int, keepdims: int, **_: Any) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    ax = norm_axis(axis, len(shape))
    return [tuple(1 if i == ax else d for i, d in enumerate(shape)) if keepdims
            else tuple(d for i, d in enumerate(shape) if i != ax)]


register("ArgMax", arg_max, arg_infer_shape, arg_normalize,
         infer_dtype=lambda inputs, **_: [np.int64])
