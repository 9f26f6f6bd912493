"""Sliding-window geometry shared by Conv and the pooling ops (not an op itself).

Pads follow ONNX order: ``[x1_begin, x2_begin, ..., x1_end, x2_end]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def out_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int,
             ceil_mode: int = 0) -> int:
    """Output length of one spatial axis (pooling's ``ceil_mode`` included)."""
    span = size + pad_begin + pad_end - dilation * (k - 1) - 1
    if span < 0:
        raise ValueError(f"window of {k} (dilation {dilation}) is larger than the padded "
                         f"input {size + pad_begin + pad_end}")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    # The last window must start inside the input or its left padding (ONNX/PyTorch rule).
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def geometry(attrs: dict[str, Any], spatial: tuple[int, ...], kernel: list[int],
             op: str) -> dict[str, Any]:
    """Normalized ``kernel_shape``, ``strides``, ``pads``, ``dilations`` (auto_pad resolved)."""
    nd = len(kernel)
    if len(spatial) != nd:
        raise ValueError(f"{op} kernel {kernel} does not fit {len(spatial)} spatial dims")
    strides = [int(v) for v in attrs.get("strides", [1] * nd)]
    dilations = [int(v) for v in attrs.get("dilations", [1] * nd)]
    pads = [int(v) for v in attrs.get("pads", [0] * 2 * nd)]
    if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd:
        raise ValueError(f"{op} strides {strides}, dilations {dilations}, pads {pads} do not "
                         f"match a {nd}-D kernel")
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad not in AUTO_PADS:
        raise ValueError(f"{op} auto_pad {auto_pad!r} not in {', '.join(AUTO_PADS)}")
    if auto_pad == "VALID":
        pads = [0] * 2 * nd
    elif auto_pad != "NOTSET":
        for i in range(nd):
            out = -(-spatial[i] // strides[i])
            total = max(0, (out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1
                        - spatial[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    return {"kernel_shape": [int(k) for k in kernel], "strides": strides, "pads": pads,
            "dilations": dilations}


def out_shape(spatial: tuple[int, ...], kernel_shape, strides, pads, dilations,
              ceil_mode: int = 0) -> tuple[int, ...]:
    nd = len(kernel_shape)
    return tuple(out_size(spatial[i], kernel_shape[i], strides[i], pads[i], pads[i + nd],
                          dilations[i], ceil_mode) for i in range(nd))


def windows(x: np.ndarray, kernel_shape, strides, pads, dilations, ceil_mode: int = 0,
            pad_value: float = 0.0, kernel_first: bool = False) -> np.ndarray:
    """A read-only strided view ``[N, C, *out, *kernel]`` (or ``[N, C, *kernel, *out]``)
    of ``x`` padded with ``pad_value`` (extra padding covers ``ceil_mode``'s windows)."""
    nd = len(kernel_shape)
    spatial = x.shape[2:]
    outs = out_shape(spatial, kernel_shape, strides, pads, dilations, ceil_mode)
    grow = []
    for i in range(nd):
        need = (outs[i] - 1) * strides[i] + dilations[i] * (kernel_shape[i] - 1) + 1
        grow.append((pads[i], max(pads[i + nd], need - spatial[i] - pads[i])))
    xp = np.pad(x, [(0, 0), (0, 0), *grow], constant_values=pad_value) if any(
        b or e for b, e in grow) else x
    st = xp.strides
    sp = st[2:]
    out_part = ([o for o in outs], [sp[i] * strides[i] for i in range(nd)])
    k_part = ([k for k in kernel_shape], [sp[i] * dilations[i] for i in range(nd)])
    first, second = (k_part, out_part) if kernel_first else (out_part, k_part)
    return np.lib.stride_tricks.as_strided(
        xp, (*xp.shape[:2], *first[0], *second[0]), (*st[:2], *first[1], *second[1]),
        writeable=False)
