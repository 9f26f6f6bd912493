"""Pad: constant / edge / reflect / wrap padding on any axis; negative pads crop.

``pads`` (``[x1_begin, x2_begin, ..., x1_end, x2_end]``) is an attribute before
opset 11 and an input after; opset 18 adds ``axes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, norm_axis, register

MODES = {"constant": "constant", "edge": "edge", "reflect": "reflect", "wrap": "wrap"}


def full_pads(rank: int, pads, axes) -> list[tuple[int, int]]:
    """(begin, end) per axis of a rank-``rank`` tensor."""
    p = [int(v) for v in np.asarray(pads).reshape(-1)]
    ax = list(range(rank)) if axes is None else [norm_axis(int(a), rank, "Pad axis")
                                                 for a in np.asarray(axes).reshape(-1)]
    if len(p) != 2 * len(ax):
        raise ValueError(f"Pad pads {p} need 2 values per padded axis ({len(ax)} axes)")
    out = [(0, 0)] * rank
    for i, a in enumerate(ax):
        out[a] = (p[i], p[i + len(ax)])
    return out


def pad(x: np.ndarray, pads_in=None, value=None, axes_in=None, *, mode: str, pads=None,
        value_attr: float = 0.0) -> np.ndarray:
    pw = full_pads(x.ndim, pads if pads_in is None else pads_in, axes_in)
    # Crop first (negative pads), then pad the rest.
    x = x[tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(pw))]
    grow = [(max(b, 0), max(e, 0)) for b, e in pw]
    if mode == "constant":
        v = value_attr if value is None or np.asarray(value).size == 0 else np.asarray(value).item()
        return np.pad(x, grow, mode="constant", constant_values=np.asarray(v, x.dtype))
    return np.pad(x, grow, mode=MODES[mode])


def infer_shape(inputs, *, mode: str, pads=None, value_attr: float = 0.0) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    given = const_value(inputs[1], "Pad pads") if len(inputs) > 1 else None
    axes = const_value(inputs[3], "Pad axes") if len(inputs) > 3 else None
    pw = full_pads(len(shape), pads if given is None else given, axes)
    out = tuple(d + b + e for d, (b, e) in zip(shape, pw, strict=True))
    if any(d < 0 for d in out):
        raise ValueError(f"Pad {pw} crops {shape} below zero")
    if mode == "reflect" and any(max(b, e) >= d for d, (b, e) in zip(shape, pw, strict=True)
                                 if b > 0 or e > 0):
        raise ValueError(f"reflect Pad {pw} needs each padded axis of {shape} longer than its pad")
    return [out]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    mode = attrs.get("mode", "constant")
    if mode not in MODES:
        raise ValueError(f"Pad mode {mode!r} not in {', '.join(MODES)}")
    pads = attrs.get("pads")
    return {"mode": mode, "pads": None if pads is None else [int(p) for p in pads],
            "value_attr": float(attrs.get("value", 0.0))}


register("Pad", pad, infer_shape, normalize, const_inputs=(1, 3))
