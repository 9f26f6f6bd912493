"""Resize (opsets 10, 11, 13, 18, 19): nearest / linear / cubic, every
coordinate_transformation_mode, ``axes``, ``keep_aspect_ratio_policy``, antialias.

Opset 10 (inputs ``X, scales``) behaves like Upsample: asymmetric coordinates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.interpolate import COORD_MODES, MODES, axis_table, resize_axis, source_coords
from tengine_host.ops.registry import const_value, norm_axis, register

POLICIES = ("stretch", "not_larger", "not_smaller")


def plan(shape: tuple[int, ...], roi, scales, sizes, *, axes, keep_aspect_ratio_policy: str,
         **_: Any) -> tuple[tuple[int, ...], list[float], list[tuple[float, float] | None]]:
    """Output shape, per-axis scale and per-axis roi."""
    r = len(shape)
    ax = list(range(r)) if axes is None else [norm_axis(a, r, "Resize axis") for a in axes]
    scl = [1.0] * r
    out = list(shape)
    if sizes is not None and np.asarray(sizes).size:
        sz = [int(v) for v in np.asarray(sizes).reshape(-1)]
        if len(sz) != len(ax):
            raise ValueError(f"Resize sizes {sz} need one value per axis {ax}")
        for a, n in zip(ax, sz, strict=True):
            scl[a], out[a] = n / shape[a], n
        if keep_aspect_ratio_policy != "stretch":
            pick = min if keep_aspect_ratio_policy == "not_larger" else max
            s = pick(scl[a] for a in ax)
            for a in ax:
                scl[a], out[a] = s, int(s * shape[a] + 0.5)
    elif scales is not None and np.asarray(scales).size:
        sc = [float(v) for v in np.asarray(scales).reshape(-1)]
        if len(sc) != len(ax) or any(v <= 0 for v in sc):
            raise ValueError(f"Resize scales {sc} need one positive value per axis {ax}")
        for a, s in zip(ax, sc, strict=True):
            scl[a], out[a] = s, int(s * shape[a])
    else:
        raise ValueError("Resize needs scales or sizes")
    rois: list[tuple[float, float] | None] = [None] * r
    if roi is not None and np.asarray(roi).size:
        rv = [float(v) for v in np.asarray(roi).reshape(-1)]
        for i, a in enumerate(ax):
            rois[a] = (rv[i], rv[i + len(ax)])
    return tuple(out), scl, rois


def resize(x: np.ndarray, roi=None, scales=None, sizes=None, **attrs: Any) -> np.ndarray:
    shape, scl, rois = plan(x.shape, roi, scales, sizes, **attrs)
    y = x.astype(np.float64)
    for a in range(x.ndim):
        if shape[a] == x.shape[a] and scl[a] == 1.0 and rois[a] in (None, (0.0, 1.0)):
            continue
        src, outside = source_coords(attrs["coordinate_transformation_mode"], x.shape[a],
                                     shape[a], scl[a], rois[a])
        idx, w = axis_table(src, x.shape[a], attrs["mode"], attrs["nearest_mode"], scl[a],
                            attrs["cubic_coeff_a"], bool(attrs["exclude_outside"]),
                            bool(attrs["antialias"]))
        y = resize_axis(y, a, idx, w, outside, attrs["extrapolation_value"])
    if np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        return np.clip(np.rint(y), info.min, info.max).astype(x.dtype)
    return y.astype(x.dtype)


def infer_shape(inputs, **attrs: Any) -> list[tuple[int, ...]]:
    vals = [const_value(inputs[i], f"Resize {w}") if len(inputs) > i else None
            for i, w in ((1, "roi"), (2, "scales"), (3, "sizes"))]
    if attrs["opset10"]:
        vals = [None, vals[0], None]  # Resize-10 reads (X, scales)
    return [plan(tuple(inputs[0].shape), *vals, **attrs)[0]]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    out = {"mode": attrs.get("mode", "nearest"),
           "coordinate_transformation_mode": attrs.get("coordinate_transformation_mode",
                                                       "half_pixel"),
           "nearest_mode": attrs.get("nearest_mode", "round_prefer_floor"),
           "cubic_coeff_a": float(attrs.get("cubic_coeff_a", -0.75)),
           "exclude_outside": int(attrs.get("exclude_outside", 0)),
           "extrapolation_value": float(attrs.get("extrapolation_value", 0.0)),
           "antialias": int(attrs.get("antialias", 0)),
           "axes": None if attrs.get("axes") is None else [int(a) for a in attrs["axes"]],
           "keep_aspect_ratio_policy": attrs.get("keep_aspect_ratio_policy", "stretch"),
           "opset10": opset < 11}
    if out["opset10"]:
        out.update(coordinate_transformation_mode="asymmetric", nearest_mode="simple")
        if out["mode"] == "bilinear":
            out["mode"] = "linear"
    for key, allowed in (("mode", MODES), ("coordinate_transformation_mode", COORD_MODES),
                         ("keep_aspect_ratio_policy", POLICIES)):
        if out[key] not in allowed:
            raise ValueError(f"Resize {key} {out[key]!r} not in {', '.join(allowed)}")
    return out


def resize_fp32(x: np.ndarray, *args: np.ndarray | None, **attrs: Any) -> np.ndarray:
    if attrs["opset10"]:
        return resize(x, None, args[0], None, **attrs)
    return resize(x, *args, **attrs)


register("Resize", resize_fp32, infer_shape, normalize, min_opset=10, const_inputs=(1, 2, 3))
