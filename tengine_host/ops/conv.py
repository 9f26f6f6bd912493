"""Conv (1-D, 2-D, 3-D; groups, dilation, asymmetric pads, auto_pad): im2col and one
batched BLAS GEMM, with fast paths for pointwise (no im2col) and depthwise 2-D
convolutions (one multiply-add per kernel tap over the whole tensor)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from accel.ir import Tensor
from tengine_host.ops.registry import ACTIVATION_ATTRS, apply_activation, register
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
    out = {k: v for k, v in attrs.items() if k in ACTIVATION_ATTRS}
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
         activation_max: float | None = None, activation_slope: np.ndarray | None = None,
         activation_alpha: float | None = None, **_: Any) -> np.ndarray:
    n, c = x.shape[:2]
    k = w.shape[0]
    outs = out_shape(x.shape[2:], kernel_shape, strides, pads, dilations)
    w = w.astype(x.dtype, copy=False)
    if group == c == k and w.shape[1] == 1 and len(kernel_shape) == 2:
        y = _depthwise(x, w, b, kernel_shape, strides, pads, dilations, outs)
        b = None  # added by _depthwise
    elif (group == 1 and all(v == 1 for v in (*kernel_shape, *strides))
          and not any(pads)):
        if b is not None and k > 2 * (c + 1):
            # Expanding pointwise conv: the bias rides in the GEMM as an extra
            # input row of ones, cheaper than a separate pass over the wide output.
            xa = np.empty((n, c + 1, x[0, 0].size), x.dtype)
            xa[:, :c] = x.reshape(n, c, -1)
            xa[:, c] = 1
            wa = np.concatenate([w.reshape(k, c), b.astype(x.dtype).reshape(k, 1)], axis=1)
            y, b = np.matmul(wa, xa), None
        else:
            y = np.matmul(w.reshape(k, c), x.reshape(n, c, -1))
    else:
        cols = im2col(x, tuple(kernel_shape), strides, pads, dilations)
        cols = cols.reshape(n, group, -1, cols.shape[-1])
        y = np.matmul(w.reshape(group, k // group, -1), cols).reshape(n, k, -1)
    y = y.reshape(n, k, *outs)
    if b is not None:
        y += b.astype(x.dtype).reshape(1, k, *([1] * len(outs)))
    return apply_activation(y, activation, activation_max,
                            activation_slope=activation_slope,
                            activation_alpha=activation_alpha)


def _depthwise(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, kernel_shape, strides,
               pads, dilations, outs) -> np.ndarray:
    """One channel per group: accumulate each kernel tap over the whole tensor.

    numpy is slow on short inner loops (a 7x7 map has rows of 7), so each tap
    is made one long contiguous run: the padded input is split into stride
    phases (``xp[a::sh, b::sw]``), each phase flattened per channel, and a tap
    is then a shifted slice of length ``oh * row`` of one phase.  The output is
    computed on the phase's full row width and the extra columns cut at the end.
    """
    n, c, h, wd = x.shape
    (r, s), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    oh, ow = outs
    # Enough bottom/right padding that every shifted run stays inside its phase.
    need_h = (oh + 1) * sh + (r - 1) * dh
    need_w = ow * sw + (s - 1) * dw
    xp_shape = (n, c, pads[0] + h + max(need_h - h - pads[0], 0),
                pads[1] + wd + max(need_w - wd - pads[1], 0))
    # A cached padded buffer per geometry: only the interior is ever written, so its
    # zero border survives, and no multi-MiB allocation (page faults) per call.
    xp = _scratch(("xp", xp_shape, pads[0], pads[1]), xp_shape, x.dtype, zero=True)
    xp[:, :, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x
    phases = {}
    for a in range(sh):
        for b in range(sw):
            taps = [(i, j) for i in range(r) for j in range(s)
                    if (i * dh) % sh == a and (j * dw) % sw == b]
            if taps:
                view = xp[:, :, a::sh, b::sw]
                if sh == sw == 1:
                    phase = xp
                else:
                    phase = _scratch(("phase", a, b, view.shape), view.shape, x.dtype)
                    phase[...] = view
                phases[a, b] = (phase.reshape(n, c, -1), phase.shape[3], taps)
    row = next(iter(phases.values()))[1]
    length = oh * row
    offsets = [(flat, (i * dh // sh) * row + j * dw // sw)
               for flat, _, taps in phases.values() for i, j in taps]
    # [C, 1, taps] with real strides: a stride-0 axis would keep matmul off BLAS.
    wt = np.stack([w[:, 0, i, j] for _, _, taps in phases.values() for i, j in taps],
                  axis=1).astype(x.dtype).reshape(c, 1, -1).copy()
    y = _scratch(("y", n, c, length), (n, c, length), x.dtype)
    # Channel blocks: each gathers its taps (im2col, cheap copies) into a buffer that
    # stays in cache, then one batched matmul computes every channel's 1 x taps product.
    block = min(c, max(1, _BLOCK_FLOATS // (len(offsets) * length)))
    # One buffer for every block: a fresh multi-MiB array per block costs page faults.
    buf = _scratch(("cols", block, len(offsets), length), (block, len(offsets), length),
                   x.dtype)
    for bn in range(n):
        for c0 in range(0, c, block):
            c1 = min(c, c0 + block)
            cols = buf[:c1 - c0]
            for t, (flat, start) in enumerate(offsets):
                cols[:, t] = flat[bn, c0:c1, start:start + length]
            np.matmul(wt[c0:c1], cols, out=y[bn, c0:c1, None, :])
    # y is a scratch buffer computed on the padded row width: the result is a
    # fresh array, written in the same pass that adds the bias.
    valid = y.reshape(n, c, oh, row)[:, :, :, :ow]
    if bias is None:
        return valid.copy()
    return np.add(valid, bias.astype(x.dtype).reshape(1, c, 1, 1))


_SCRATCH = threading.local()


def _scratch(key: tuple, shape: tuple[int, ...], dtype: np.dtype, zero: bool = False
             ) -> np.ndarray:
    """A per-thread work buffer reused across calls (never returned to callers)."""
    cache = getattr(_SCRATCH, "buffers", None)
    if cache is None:
        cache = _SCRATCH.buffers = {}
    key = (*key, np.dtype(dtype).str)
    buf = cache.get(key)
    if buf is None:
        buf = cache[key] = (np.zeros if zero else np.empty)(shape, dtype)
    return buf


#: Floats per depthwise im2col block (512 KiB): large enough for BLAS, small for L2.
_BLOCK_FLOATS = 1 << 17


register("Conv", conv, infer_shape, normalize)
