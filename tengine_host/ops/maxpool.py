"""MaxPool (1-D/2-D/3-D): padded positions never win; ``ceil_mode``, dilations, auto_pad,
and the optional ``Indices`` output (flat row-major index, or column-major over the
spatial axes with ``storage_order=1``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register
from tengine_host.ops.windows import geometry, out_shape, windows


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if "kernel_shape" not in attrs:
        raise ValueError("MaxPool needs kernel_shape")
    out = geometry(attrs, tuple(inputs[0].shape[2:]), list(attrs["kernel_shape"]), "MaxPool")
    out.update(ceil_mode=int(attrs.get("ceil_mode", 0)),
               storage_order=int(attrs.get("storage_order", 0)),
               # The Indices output costs an argmax; compute it only when the node has it.
               with_indices=int(attrs.get("_n_outputs", 1) > 1))
    return out


def infer_shape(inputs, *, kernel_shape, strides, pads, dilations, ceil_mode, **_: Any
                ) -> list[tuple[int, ...]]:
    x = tuple(inputs[0].shape)
    y = (*x[:2], *out_shape(x[2:], kernel_shape, strides, pads, dilations, ceil_mode))
    return [y, y]


def _lowest(dtype: np.dtype):
    return -np.inf if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def _indices(win, shape, kernel_shape, strides, pads, dilations, storage_order) -> np.ndarray:
    nd = len(kernel_shape)
    n, c = shape[:2]
    spatial = shape[2:]
    flat = win.reshape(*win.shape[:2 + nd], -1).argmax(axis=-1)
    taps = np.unravel_index(flat, kernel_shape)
    outs = win.shape[2:2 + nd]
    coords = []
    for i in range(nd):
        o = np.arange(outs[i]).reshape([-1 if j == i else 1 for j in range(nd)])
        coords.append(o * strides[i] - pads[i] + taps[i] * dilations[i])
    if storage_order:
        idx = np.zeros_like(flat)
        mult = 1
        for i in range(nd):
            idx += coords[i] * mult
            mult *= spatial[i]
    else:
        idx = np.ravel_multi_index(coords, spatial, mode="clip")
    base = (np.arange(n * c).reshape(n, c, *([1] * nd)) * int(np.prod(spatial)))
    return (base + idx).astype(np.int64)


def maxpool_fp32(x: np.ndarray, **attrs: Any) -> tuple[np.ndarray, np.ndarray] | np.ndarray:
    win_attrs = {k: attrs[k] for k in ("kernel_shape", "strides", "pads", "dilations")}
    win = windows(x, ceil_mode=attrs["ceil_mode"], pad_value=_lowest(x.dtype), **win_attrs)
    nd = len(attrs["kernel_shape"])
    y = win.max(axis=tuple(range(-nd, 0)))
    if not attrs["with_indices"]:
        return y
    return y, _indices(win, x.shape, storage_order=attrs["storage_order"], **win_attrs)


register("MaxPool", maxpool_fp32, infer_shape, normalize,
         infer_dtype=lambda inputs, **_: [inputs[0].dtype, np.int64])
