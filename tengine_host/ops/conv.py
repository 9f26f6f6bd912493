"""Conv (ONNX opset 1+/11): 2-D convolution via im2col and one BLAS GEMM per group."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ir import Tensor
from tengine_host.ops.registry import apply_activation, register


def conv_out_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int,
                  dilation: int) -> int:
    """Output length of one spatial axis."""
    return (size + pad_begin + pad_end - dilation * (k - 1) - 1) // stride + 1


def normalize(attrs: dict[str, Any], inputs: list[Tensor | None], opset: int) -> dict[str, Any]:
    """Fill ``kernel_shape``, ``strides``, ``pads`` (ONNX order), ``dilations``, ``group``."""
    x, w = inputs[0], inputs[1]
    if w is None or len(w.shape) != 4:
        shape = None if w is None else w.shape
        raise ValueError(f"Conv supports 2-D kernels only, weight shape {shape}")
    kernel = list(attrs.get("kernel_shape", w.shape[2:]))
    strides = list(attrs.get("strides", [1, 1]))
    dilations = list(attrs.get("dilations", [1, 1]))
    pads = list(attrs.get("pads", [0, 0, 0, 0]))
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-x.shape[2 + i] // strides[i])
            total = max(0, (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
                        - x.shape[2 + i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + 2] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad not in ("NOTSET", "VALID"):
        raise ValueError(f"Conv auto_pad {auto_pad!r} not in NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    out = {k: v for k, v in attrs.items() if k != "auto_pad"}
    out.update(kernel_shape=kernel, strides=strides, pads=pads, dilations=dilations,
               group=int(attrs.get("group", 1)))
    return out


def infer_shape(inputs: list[Tensor | None], *, kernel_shape, strides, pads, dilations,
                group, **_: Any) -> list[tuple[int, ...]]:
    x, w = inputs[0], inputs[1]
    n, c, h, wd = x.shape
    if c != w.shape[1] * group:
        raise ValueError(f"Conv input has {c} channels but weight {w.shape} with group {group} "
                         f"expects {w.shape[1] * group}")
    oh = conv_out_size(h, kernel_shape[0], strides[0], pads[0], pads[2], dilations[0])
    ow = conv_out_size(wd, kernel_shape[1], strides[1], pads[1], pads[3], dilations[1])
    return [(n, w.shape[0], oh, ow)]


def im2col(x: np.ndarray, kernel: tuple[int, int], strides, pads, dilations,
           pad_value: float = 0) -> np.ndarray:
    """Patches of ``x`` [N,C,H,W] as [N, OH*OW, C*R*S] (channel-major, then r, s)."""
    n, c, h, w = x.shape
    r, s = kernel
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=pad_value)
    oh = conv_out_size(h, r, strides[0], pads[0], pads[2], dilations[0])
    ow = conv_out_size(w, s, strides[1], pads[1], pads[3], dilations[1])
    sn, sc, sh, sw = xp.strides
    # A strided view [N, C, R, S, OH, OW] avoids copying until the final reshape.
    view = np.lib.stride_tricks.as_strided(
        xp, (n, c, r, s, oh, ow),
        (sn, sc, sh * dilations[0], sw * dilations[1], sh * strides[0], sw * strides[1]),
        writeable=False)
    return view.transpose(0, 4, 5, 1, 2, 3).reshape(n, oh * ow, c * r * s)


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, kernel_shape, strides,
         pads, dilations, group: int = 1, activation: str | None = None,
         **_: Any) -> np.ndarray:
    n, c, h, wd = x.shape
    k = w.shape[0]
    oh = conv_out_size(h, kernel_shape[0], strides[0], pads[0], pads[2], dilations[0])
    ow = conv_out_size(wd, kernel_shape[1], strides[1], pads[1], pads[3], dilations[1])
    cg, kg = c // group, k // group
    y = np.empty((n, k, oh * ow), dtype=np.float32)
    for g in range(group):
        cols = im2col(x[:, g * cg:(g + 1) * cg], tuple(kernel_shape), strides, pads, dilations)
        wg = w[g * kg:(g + 1) * kg].reshape(kg, -1)
        y[:, g * kg:(g + 1) * kg] = np.matmul(cols, wg.T).transpose(0, 2, 1)
    if b is not None:
        y += b.reshape(1, k, 1)
    return apply_activation(y.reshape(n, k, oh, ow), activation)


register("Conv", conv, infer_shape, normalize)
