"""Transpose: permute axes (``perm`` defaults to reversing them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def transpose(x: np.ndarray, *, perm: list[int] | None) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, perm))


def infer_shape(inputs, *, perm: list[int] | None) -> list[tuple[int, ...]]:
    shape = inputs[0].shape
    p = list(range(len(shape)))[::-1] if perm is None else perm
    if sorted(p) != list(range(len(shape))):
        raise ValueError(f"Transpose perm {perm} is not a permutation of rank {len(shape)}")
    return [tuple(shape[i] for i in p)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    perm = attrs.get("perm")
    return {"perm": None if perm is None else [int(p) for p in perm]}


register("Transpose", transpose, infer_shape, normalize)
