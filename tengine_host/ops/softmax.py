"""Softmax: opset 13+ normalizes along ``axis`` (default -1); older opsets
coerce the input to 2-D at ``axis`` (default 1) and normalize each row."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def softmax(x: np.ndarray, *, axis: int, coerce_2d: bool) -> np.ndarray:
    shape = x.shape
    if coerce_2d:
        ax = axis % len(shape)
        x = x.reshape(int(np.prod(shape[:ax], dtype=np.int64)), -1)
        axis = 1
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).reshape(shape).astype(x.dtype, copy=False)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    legacy = opset < 13
    return {"axis": int(attrs.get("axis", 1 if legacy else -1)), "coerce_2d": legacy}


register("Softmax", softmax, lambda inputs, **_: [inputs[0].shape], normalize)
