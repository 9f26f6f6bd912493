"""Upsample (opsets 7-9, deprecated by Resize): nearest or linear with asymmetric
coordinates; ``scales`` is an attribute at opset 7 and an input from opset 9."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import const_value, register
from tengine_host.ops.resize import resize

_FIXED = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "simple",
          "cubic_coeff_a": -0.75, "exclude_outside": 0, "extrapolation_value": 0.0,
          "antialias": 0, "axes": None, "keep_aspect_ratio_policy": "stretch"}


def upsample(x: np.ndarray, scales_in: np.ndarray | None = None, *, mode: str,
             scales=None) -> np.ndarray:
    s = scales if scales_in is None else scales_in
    return resize(x, None, np.asarray(s, np.float64), None, mode=mode, **_FIXED)


def infer_shape(inputs, *, mode: str, scales=None) -> list[tuple[int, ...]]:
    s = const_value(inputs[1], "Upsample scales") if len(inputs) > 1 else scales
    if s is None or len(np.asarray(s).reshape(-1)) != len(inputs[0].shape):
        raise ValueError(f"Upsample needs one scale per axis of {inputs[0].shape}, got {s}")
    return [tuple(int(np.floor(d * float(v))) for d, v in zip(inputs[0].shape,
                                                                np.asarray(s).reshape(-1),
                                                                strict=True))]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    mode = {"bilinear": "linear"}.get(attrs.get("mode", "nearest"), attrs.get("mode", "nearest"))
    if mode not in ("nearest", "linear"):
        raise ValueError(f"Upsample mode {mode!r} not in nearest, linear")
    s = attrs.get("scales")
    return {"mode": mode, "scales": None if s is None else [float(v) for v in s]}


register("Upsample", upsample, infer_shape, normalize, min_opset=7, const_inputs=(1,))
