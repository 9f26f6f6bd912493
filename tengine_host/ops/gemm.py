"""Gemm: Y = alpha * A' @ B' + beta * C, with A' / B' optionally transposed."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import ACTIVATION_ATTRS, apply_activation, register


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, alpha: float = 1.0,
         beta: float = 1.0, transA: int = 0, transB: int = 0, activation: str | None = None,
         activation_max: float | None = None, activation_slope: np.ndarray | None = None,
         activation_alpha: float | None = None, **_: Any) -> np.ndarray:
    a = a.T if transA else a
    b = b.T if transB else b
    y = np.matmul(a, b)
    if alpha != 1.0:
        y *= np.float32(alpha)
    if c is not None:
        y += np.float32(beta) * c if beta != 1.0 else c
    return apply_activation(y.astype(np.float32, copy=False), activation, activation_max,
                            activation_slope=activation_slope,
                            activation_alpha=activation_alpha)


def infer_shape(inputs, *, transA: int, transB: int, **_: Any) -> list[tuple[int, ...]]:
    a, b = inputs[0].shape, inputs[1].shape
    if len(a) != 2 or len(b) != 2:
        raise ValueError(f"Gemm needs 2-D operands, got {a} and {b}")
    m, ka = (a[1], a[0]) if transA else a
    kb, n = (b[1], b[0]) if transB else b
    if ka != kb:
        raise ValueError(f"Gemm inner dimensions differ: A {a} (transA={transA}), "
                         f"B {b} (transB={transB})")
    return [(m, n)]


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    out = {k: v for k, v in attrs.items() if k in ACTIVATION_ATTRS}
    out.update(alpha=float(attrs.get("alpha", 1.0)), beta=float(attrs.get("beta", 1.0)),
               transA=int(attrs.get("transA", 0)), transB=int(attrs.get("transB", 0)))
    return out


register("Gemm", gemm, infer_shape, normalize)
