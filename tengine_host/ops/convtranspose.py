"""ConvTranspose (1-D/2-D/3-D; groups, dilation, pads, output_padding, output_shape,
auto_pad): one batched BLAS GEMM to columns, then col2im as one strided
accumulation per kernel tap (vectorized over batch, channels and positions)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    x, w = inputs[0], inputs[1]
    if w is None or len(w.shape) != len(x.shape) or len(w.shape) < 3:
        raise ValueError(f"ConvTranspose needs input and weight of equal rank >= 3, got "
                         f"{x.shape} and {None if w is None else w.shape}")
    nd = len(w.shape) - 2
    kernel = [int(k) for k in attrs.get("kernel_shape", w.shape[2:])]
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    dil = [int(v) for v in attrs.get("dilations", [1] * nd)]
    opad = [int(v) for v in attrs.get("output_padding", [0] * nd)]
    pads = [int(v) for v in attrs.get("pads", [0] * 2 * nd)]
    auto_pad = attrs.get("auto_pad", "NOTSET")
    out_shape = attrs.get("output_shape")
    spatial = x.shape[2:]
    full = [strides[i] * (spatial[i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1
            for i in range(nd)]
    if out_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if out_shape is None:
            target = [spatial[i] * strides[i] for i in range(nd)]
        else:
            target = [int(v) for v in out_shape][-nd:]
        for i in range(nd):
            total = full[i] - target[i]
            half = total // 2
            # ONNX: SAME_UPPER puts the smaller half first, otherwise the larger.
            pads[i], pads[i + nd] = ((half, total - half) if auto_pad == "SAME_UPPER"
                                     else (total - half, half))
    elif auto_pad == "VALID":
        pads = [0] * 2 * nd
    elif auto_pad != "NOTSET":
        raise ValueError(f"ConvTranspose auto_pad {auto_pad!r} not in NOTSET, SAME_UPPER, "
                         f"SAME_LOWER, VALID")
    return {"kernel_shape": kernel, "strides": strides, "dilations": dil, "pads": pads,
            "output_padding": opad, "group": int(attrs.get("group", 1))}


def _out(spatial, kernel_shape, strides, dilations, pads, output_padding) -> tuple[int, ...]:
    nd = len(kernel_shape)
    return tuple(strides[i] * (spatial[i] - 1) + output_padding[i]
                 + (kernel_shape[i] - 1) * dilations[i] + 1 - pads[i] - pads[i + nd]
                 for i in range(nd))


def infer_shape(inputs, *, group, **geo: Any) -> list[tuple[int, ...]]:
    x, w = tuple(inputs[0].shape), tuple(inputs[1].shape)
    if x[1] != w[0] or x[1] % group:
        raise ValueError(f"ConvTranspose input has {x[1]} channels, weight {w} (group {group})")
    return [(x[0], w[1] * group, *_out(x[2:], **geo))]


def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   kernel_shape, strides, dilations, pads, output_padding, group: int
                   ) -> np.ndarray:
    n, c = x.shape[:2]
    nd = len(kernel_shape)
    spatial = x.shape[2:]
    kg = w.shape[1]
    k = kg * group
    cg = c // group
    taps = int(np.prod(kernel_shape))
    # cols[n, g, kg * taps, L] = W_g^T @ x_g
    wg = w.astype(x.dtype).reshape(group, cg, kg * taps).transpose(0, 2, 1)
    cols = np.matmul(wg, x.reshape(n, group, cg, -1)).reshape(n, k, *kernel_shape, *spatial)
    outs = _out(spatial, kernel_shape, strides, dilations, pads, output_padding)
    full = [max(strides[i] * (spatial[i] - 1) + (kernel_shape[i] - 1) * dilations[i] + 1,
                pads[i] + outs[i]) for i in range(nd)]
    y = np.zeros((n, k, *full), dtype=x.dtype)
    for tap in itertools.product(*(range(kk) for kk in kernel_shape)):
        dst = tuple(slice(t * d, t * d + s * (m - 1) + 1, s)
                    for t, d, s, m in zip(tap, dilations, strides, spatial, strict=True))
        y[(slice(None), slice(None), *dst)] += cols[(slice(None), slice(None), *tap)]
    y = y[(slice(None), slice(None), *(slice(pads[i], pads[i] + outs[i]) for i in range(nd)))]
    if b is not None:
        y = y + b.astype(x.dtype).reshape(1, k, *([1] * nd))
    return np.ascontiguousarray(y)


register("ConvTranspose", conv_transpose, infer_shape, normalize)
