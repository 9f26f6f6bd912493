"""SpaceToDepth: ``blocksize x blocksize`` pixel blocks become ``blocksize**2`` channel
blocks; ``mode`` DCR (the default: the inverse of DepthToSpace's DCR) or CRD (of its
CRD)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.depthtospace import block_attrs
from tengine_host.ops.registry import register


def space_to_depth(x: np.ndarray, *, blocksize: int, mode: str) -> np.ndarray:
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else y.transpose(0, 1, 3, 5, 2, 4)
    return np.ascontiguousarray(y.reshape(n, c * b * b, h // b, w // b))


def infer_shape(inputs, *, blocksize: int, **_: Any) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    if len(shape) != 4 or shape[2] % blocksize or shape[3] % blocksize:
        raise ValueError(f"SpaceToDepth of {shape} with blocksize {blocksize}: needs a 4-D "
                         f"input whose height and width are multiples of it")
    n, c, h, w = shape
    return [(n, c * blocksize * blocksize, h // blocksize, w // blocksize)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return block_attrs("SpaceToDepth", attrs)


register("SpaceToDepth", space_to_depth, infer_shape, normalize)
