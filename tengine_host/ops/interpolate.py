"""Separable interpolation shared by Resize and Upsample (not an op itself).

Each resized axis gets a table of source indices and weights ``[out, taps]``;
applying it is one ``take`` and one weighted sum over the whole tensor, so the
cost does not depend on a Python loop over pixels.
"""

from __future__ import annotations

import numpy as np

COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
               "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
MODES = ("nearest", "linear", "cubic")


def source_coords(mode: str, n_in: int, n_out: int, scale: float,
                  roi: tuple[float, float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Source coordinate of every output position, and the out-of-range mask of
    ``tf_crop_and_resize`` (``None`` for the other modes)."""
    y = np.arange(n_out, dtype=np.float64)
    # ONNX's length_resized is scale * n_in, fractional when scales are (onnx's reference
    # follows the spec; onnxruntime uses the integer length, so the two differ then).
    width = scale * n_in
    if mode == "align_corners":
        return (np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)), None
    if mode == "asymmetric":
        return y / scale, None
    if mode == "pytorch_half_pixel":
        return (np.full(n_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5), None
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5, None
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / width)
        return offset + (y + 0.5) / scale - 0.5, None
    if mode == "tf_crop_and_resize":
        start, end = roi if roi is not None else (0.0, 1.0)
        if width == 1:
            x = np.full(n_out, (end - start) * (n_in - 1) / 2)
        else:
            x = y * (end - start) * (n_in - 1) / (width - 1)
        x = x + start * (n_in - 1)
        return x, (x < 0) | (x > n_in - 1)
    raise ValueError(f"coordinate_transformation_mode {mode!r} not in {', '.join(COORD_MODES)}")


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def axis_table(x: np.ndarray, n_in: int, mode: str, nearest_mode: str, scale: float,
               cubic_a: float, exclude_outside: bool, antialias: bool
               ) -> tuple[np.ndarray, np.ndarray]:
    """Indices (clamped to the input, i.e. edge padding) and weights, both ``[out, taps]``."""
    if mode == "nearest":
        base = np.floor(x)
        frac = x - base
        if nearest_mode == "round_prefer_floor":
            idx = base + (frac > 0.5)
        elif nearest_mode == "round_prefer_ceil":
            idx = base + (frac >= 0.5)
        elif nearest_mode == "floor":
            idx = base
        elif nearest_mode == "ceil":
            idx = np.ceil(x)
        elif nearest_mode == "simple":  # Resize-10 / Upsample: floor up, ceil down
            idx = np.ceil(x) if scale < 1 else base
        else:
            raise ValueError(f"nearest_mode {nearest_mode!r} not in {', '.join(NEAREST_MODES)}")
        return np.clip(idx, 0, n_in - 1).astype(np.intp)[:, None], np.ones((len(x), 1))
    radius = 1 if mode == "linear" else 2
    s = min(scale, 1.0) if antialias else 1.0
    reach = int(np.ceil(radius / s))
    taps = np.floor(x)[:, None] + np.arange(-reach + 1, reach + 1)[None, :]
    t = (taps - x[:, None]) * s
    w = np.clip(1 - np.abs(t), 0, None) if mode == "linear" else _cubic(t, cubic_a)
    if exclude_outside:
        w = np.where((taps < 0) | (taps >= n_in), 0.0, w)
    if antialias or exclude_outside:
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    return np.clip(taps, 0, n_in - 1).astype(np.intp), w


def resize_axis(data: np.ndarray, axis: int, idx: np.ndarray, w: np.ndarray,
                outside: np.ndarray | None, extrapolation: float) -> np.ndarray:
    """Apply one axis table to ``data`` (float64 in, float64 out)."""
    if idx.shape[1] == 1:
        out = np.take(data, idx[:, 0], axis=axis)
    else:
        g = np.take(data, idx, axis=axis)  # [..., out, taps, ...]
        shape = (1,) * axis + w.shape + (1,) * (data.ndim - axis - 1)
        out = (g * w.reshape(shape)).sum(axis=axis + 1)
    if outside is not None and outside.any():
        shape = (1,) * axis + (len(outside),) + (1,) * (data.ndim - axis - 1)
        out = np.where(outside.reshape(shape), extrapolation, out)
    return out
