"""MatMul: numpy ``matmul`` semantics (batched, broadcast, 1-D promotion) through BLAS."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b).astype(a.dtype, copy=False)


def infer_shape(inputs, **_) -> list[tuple[int, ...]]:
    a, b = tuple(inputs[0].shape), tuple(inputs[1].shape)
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"MatMul inner dimensions differ: {a} @ {b}")
    try:
        batch = tuple(np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise ValueError(f"MatMul batch dimensions of {a} and {b} do not broadcast") from None
    out = (*batch, *(a2[-2:-1] if len(a) > 1 else ()), *(b2[-1:] if len(b) > 1 else ()))
    return [tuple(int(d) for d in out)]


register("MatMul", matmul, infer_shape)
