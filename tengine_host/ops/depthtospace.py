"""DepthToSpace: blocks of ``blocksize**2`` channels become ``blocksize x blocksize``
pixels (the pixel shuffle of super-resolution networks); ``mode`` DCR (depth, column,
row: the default) or CRD (PyTorch's ``PixelShuffle``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def depth_to_space(x: np.ndarray, *, blocksize: int, mode: str) -> np.ndarray:
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return np.ascontiguousarray(y.reshape(n, c // (b * b), h * b, w * b))


def infer_shape(inputs, *, blocksize: int, **_: Any) -> list[tuple[int, ...]]:
    shape = tuple(inputs[0].shape)
    if len(shape) != 4 or shape[1] % (blocksize * blocksize):
        raise ValueError(f"DepthToSpace of {shape} with blocksize {blocksize}: needs a 4-D "
                         f"input whose channels are a multiple of {blocksize * blocksize}")
    n, c, h, w = shape
    return [(n, c // (blocksize * blocksize), h * blocksize, w * blocksize)]


def block_attrs(op: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """``blocksize`` (at least 1) and ``mode`` (DCR, the default, or CRD) of ``op``, this op
    or SpaceToDepth."""
    mode = attrs.get("mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in ("DCR", "CRD"):
        raise ValueError(f"{op} mode {mode!r}: allowed 'DCR' or 'CRD'")
    if int(attrs.get("blocksize", 0)) < 1:
        raise ValueError(f"{op} blocksize {attrs.get('blocksize')!r}: must be >= 1")
    return {"blocksize": int(attrs["blocksize"]), "mode": mode}


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    return block_attrs("DepthToSpace", attrs)


register("DepthToSpace", depth_to_space, infer_shape, normalize)
