"""Conv (1-D, 2-D, 3-D; groups, dilation, asymmetric pads, auto_pad): im2col and one
batched BLAS GEMM, with fast paths for pointwise (no im2col) and depthwise 2-D
convolutions (one multiply-add per kernel tap over the whole tensor)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ir import Tensor
from tengine_host.ops.registry import apply_activation, register
from tengine_host.ops.windows import geometry, out_shape, out_size, windows


def conv_out_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int,
                  dilation: int) -> int:
    """Output length of one spatial axis."""
    return out_size(size, k, stride, pad_begin, pad_end, dilation)


def normalize(attrs: dict[str, Any], inputs: list[Tensor | None], opset: int) -> dict[str, Any]:
    """Fill ``kernel_shape``, ``strides``, ``pads`` (ONNX order), ``dilations``, ``group``."""
    x, w = inputs[0], inputs[1]
    if w is None or len(w.shape) < 3 or len(x.shape) != len(w.shape):
        raise ValueError(f"Conv needs input and weight of equal rank >= 3, got "
                         f"{x.shape} and {None if w is None else w.shape}")
    kernel = list(attrs.get("kernel_shape", w.shape[2:]))
    out = {k: v for k, v in attrs.items() if k == "activation"}
    out.update(geometry(attrs, tuple(x.shape[2:]), kernel, "Conv"))
    out["group"] = int(attrs.get("group", 1))
    return out


def infer_shape(inputs: list[Tensor | None], *, kernel_shape, strides, pads, dilations,
                group, **_: Any) -> list[tuple[int, ...]]:
    x, w = inputs[0], inputs[1]
    c = x.shape[1]
    if c != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(f"Conv input has {c} channels but weight {w.shape} with group {group} "
                         f"expects {w.shape[1] * group}")
    if tuple(w.shape[2:]) != tuple(kernel_shape):
        raise ValueError(f"Conv kernel_shape {kernel_shape} differs from the weight {w.shape}")
    if inputs[2:3] and inputs[2] is not None and tuple(inputs[2].shape) != (w.shape[0],):
        raise ValueError(f"Conv bias shape {inputs[2].shape} is not ({w.shape[0]},)")
    return [(x.shape[0], w.shape[0],
             *out_shape(tuple(x.shape[2:]), kernel_shape, strides, pads, dilations))]


def im2col(x: np.ndarray, kernel: tuple[int, ...], strides, pads, dilations,
           pad_value: float = 0) -> np.ndarray:
    """Patches of ``x`` [N, C, *spatial] as [N, C*prod(kernel), prod(out)] (channel-major)."""
    view = windows(x, kernel, strides, pads, dilations, pad_value=pad_value, kernel_first=True)
    n, c = x.shape[:2]
    return view.reshape(n, c * int(np.prod(kernel)), -1)


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, kernel_shape, strides,
         pads, dilations, group: int = 1, activation: str | None = None,
         **_: Any) -> np.ndarray:
    n, c = x.shape[:2]
    k = w.shape[0]
    outs = out_shape(x.shape[2:], kernel_shape, strides, pads, dilations)
    w = w.astype(x.dtype, copy=False)
    if group == c == k and w.shape[1] == 1 and len(kernel_shape) == 2:
        y = _depthwise(x, w, kernel_shape, strides, pads, dilations, outs)
    elif (group == 1 and all(v == 1 for v in (*kernel_shape, *strides))
          and not any(pads)):
        y = np.matmul(w.reshape(k, c), x.reshape(n, c, -1))
    else:
        cols = im2col(x, tuple(kernel_shape), strides, pads, dilations)
        cols = cols.reshape(n, group, -1, cols.shape[-1])
        y = np.matmul(w.reshape(group, k // group, -1), cols).reshape(n, k, -1)
    y = y.reshape(n, k, *outs)
    if b is not None:
        y += b.astype(x.dtype).reshape(1, k, *([1] * len(outs)))
    return apply_activation(y, activation)


def _depthwise(x: np.ndarray, w: np.ndarray, kernel_shape, strides, pads, dilations, outs
               ) -> np.ndarray:
    """One channel per group: accumulate each kernel tap over the whole tensor."""
    n, c, h, wd = x.shape
    (r, s), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    oh, ow = outs
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], max(pads[2], 0)), (pads[1], max(pads[3], 0))))
    y = np.zeros((n, c, oh, ow), dtype=x.dtype)
    tmp = np.empty_like(y)
    for i in range(r):
        for j in range(s):
            top, left = i * dh, j * dw
            tap = xp[:, :, top:top + sh * (oh - 1) + 1:sh, left:left + sw * (ow - 1) + 1:sw]
            np.multiply(tap, w[:, 0, i, j].reshape(1, c, 1, 1), out=tmp)
            y += tmp
    return y


register("Conv", conv, infer_shape, normalize)
