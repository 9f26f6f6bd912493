"""Tile: the input repeated ``repeats[i]`` times along axis ``i``."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import const_value, register


def tile(x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    return np.tile(x, [int(r) for r in np.asarray(repeats).reshape(-1)])


def infer_shape(inputs) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    reps = [int(r) for r in const_value(inputs[1], "Tile repeats").reshape(-1)]
    if len(reps) != len(shape) or min(reps, default=0) < 0:
        raise ValueError(f"Tile repeats {reps}: one non-negative count per axis of {shape}")
    return [tuple(d * r for d, r in zip(shape, reps, strict=True))]


register("Tile", tile, infer_shape, min_opset=6, const_inputs=(1,))
