"""MaxPool (2-D): padded positions never win (they hold -inf); ``ceil_mode`` supported."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def _out(size: int, k: int, s: int, p0: int, p1: int, d: int, ceil_mode: int) -> int:
    span = size + p0 + p1 - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    # ONNX/PyTorch rule: the last window must start inside the input or left padding.
    if ceil_mode and (out - 1) * s >= size + p0:
        out -= 1
    return out


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if "kernel_shape" not in attrs or len(attrs["kernel_shape"]) != 2:
        raise ValueError(f"MaxPool supports 2-D kernels only, kernel_shape "
                         f"{attrs.get('kernel_shape')}")
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad not in ("NOTSET", "VALID"):
        raise ValueError(f"MaxPool auto_pad {auto_pad!r} not supported (NOTSET, VALID)")
    if int(attrs.get("storage_order", 0)):
        raise ValueError("MaxPool storage_order=1 (the Indices output) is not supported")
    return {"kernel_shape": list(attrs["kernel_shape"]),
            "strides": list(attrs.get("strides", [1, 1])),
            "pads": list(attrs.get("pads", [0, 0, 0, 0])),
            "dilations": list(attrs.get("dilations", [1, 1])),
            "ceil_mode": int(attrs.get("ceil_mode", 0))}


def infer_shape(inputs, *, kernel_shape, strides, pads, dilations, ceil_mode
                ) -> list[tuple[int, ...]]:
    n, c, h, w = inputs[0].shape
    return [(n, c,
             _out(h, kernel_shape[0], strides[0], pads[0], pads[2], dilations[0], ceil_mode),
             _out(w, kernel_shape[1], strides[1], pads[1], pads[3], dilations[1], ceil_mode))]


def maxpool(x: np.ndarray, *, kernel_shape, strides, pads, dilations, ceil_mode
            ) -> np.ndarray:
    n, c, h, w = x.shape
    (_, _, oh, ow), = infer_shape([x], kernel_shape=kernel_shape, strides=strides, pads=pads,
                                  dilations=dilations, ceil_mode=ceil_mode)
    r, s = kernel_shape
    # Extra bottom/right padding covers the partial windows that ceil_mode adds.
    need_h = (oh - 1) * strides[0] + dilations[0] * (r - 1) + 1
    need_w = (ow - 1) * strides[1] + dilations[1] * (s - 1) + 1
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], max(0, need_h - h - pads[0])),
                    (pads[1], max(0, need_w - w - pads[1]))), constant_values=-np.inf)
    sn, sc, sh, sw = xp.strides
    win = np.lib.stride_tricks.as_strided(
        xp, (n, c, oh, ow, r, s),
        (sn, sc, sh * strides[0], sw * strides[1], sh * dilations[0], sw * dilations[1]),
        writeable=False)
    return win.max(axis=(4, 5)).astype(x.dtype, copy=False)


register("MaxPool", maxpool, infer_shape, normalize)
