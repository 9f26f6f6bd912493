"""The one op registry: every op type maps to its fp32 function and shape inference.

Each op module calls :func:`register` once at import; ``tengine_host.ops``
imports the modules explicitly (never by scanning), so the registry is the
single answer to "which ops does the host engine implement?".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from accel.ir import Tensor

Fp32Fn = Callable[..., "np.ndarray | tuple[np.ndarray, ...]"]
ShapeFn = Callable[..., "list[tuple[int, ...]]"]
NormalizeFn = Callable[[dict[str, Any], "list[Tensor | None]", int], dict[str, Any]]
DtypeFn = Callable[..., "list[np.dtype]"]


@dataclass(frozen=True)
class OpDef:
    """How the host engine runs one ONNX op type.

    Attributes
    ----------
    op_type : str
        ONNX op type, e.g. ``"Conv"``.
    fp32 : callable
        ``fp32(*inputs, **attrs)`` on numpy arrays (``None`` for omitted
        optional inputs); returns one array or a tuple, one per output.
    infer_shape : callable
        ``infer_shape(inputs: list[Tensor | None], **attrs)`` -> output shapes.
        Receives ``Tensor`` objects so it can read constant operands (Reshape).
    normalize : callable
        ``normalize(attrs, inputs, opset) -> attrs`` fills in ONNX defaults so
        every later stage sees complete attributes.
    min_opset : int
        Oldest opset whose semantics this implementation follows.
    infer_dtype : callable or None
        ``infer_dtype(inputs, **attrs)`` -> one numpy dtype per output; ``None``
        means every output has the dtype of the first input.
    const_inputs : tuple of int
        Positions of inputs that decide output shapes (Reshape's ``shape``,
        Resize's ``scales``...).  The engine has static shapes, so the importer
        needs their values: constants, or computed from constants and shapes.
    shape_only : bool
        The outputs depend on the input's shape alone (``Shape``), so the
        importer knows their values even when the input is an activation.
    """

    op_type: str
    fp32: Fp32Fn
    infer_shape: ShapeFn
    normalize: NormalizeFn
    min_opset: int = 1
    infer_dtype: DtypeFn | None = None
    const_inputs: tuple[int, ...] = ()
    shape_only: bool = False

    def output_dtypes(self, inputs: list[Tensor | None], attrs: dict[str, Any], n: int
                      ) -> list[np.dtype]:
        """Dtypes of the ``n`` outputs for these inputs and normalized attributes."""
        if self.infer_dtype is not None:
            return [np.dtype(d) for d in self.infer_dtype(inputs, **attrs)]
        first = next((t.dtype for t in inputs if t is not None), np.dtype(np.float32))
        return [np.dtype(first)] * n


OPS: dict[str, OpDef] = {}


def _keep(attrs: dict[str, Any], inputs: list[Tensor | None], opset: int) -> dict[str, Any]:
    return dict(attrs)


def register(op_type: str, fp32: Fp32Fn, infer_shape: ShapeFn,
             normalize: NormalizeFn | None = None, min_opset: int = 1, *,
             infer_dtype: DtypeFn | None = None, const_inputs: tuple[int, ...] = (),
             shape_only: bool = False) -> OpDef:
    """Add ``op_type`` to the registry; registering a type twice is an error."""
    if op_type in OPS:
        raise ValueError(f"op {op_type!r} is already registered")
    op = OpDef(op_type, fp32, infer_shape, normalize or _keep, min_opset, infer_dtype,
               tuple(const_inputs), shape_only)
    OPS[op_type] = op
    return op


def get_op(op_type: str) -> OpDef:
    """The registered definition of ``op_type``; the error lists what exists."""
    try:
        return OPS[op_type]
    except KeyError:
        raise KeyError(f"op {op_type!r} has no host implementation; implemented: "
                       f"{', '.join(sorted(OPS))}") from None


def run_op(op_type: str, inputs: list[np.ndarray | None], attrs: dict[str, Any]
           ) -> tuple[np.ndarray, ...]:
    """Run the fp32 function and always return a tuple of outputs."""
    out = get_op(op_type).fp32(*inputs, **attrs)
    return out if isinstance(out, tuple) else (out,)


def per_channel(values, like: np.ndarray) -> np.ndarray:
    """``values`` (one per channel, or one) shaped to broadcast along axis 1 of ``like``,
    in its dtype."""
    return np.asarray(values, like.dtype).reshape(1, -1, *([1] * (like.ndim - 2)))


def apply_activation(y: np.ndarray, activation: str | None,
                     activation_max: float | None = None, *,
                     activation_slope: np.ndarray | None = None,
                     activation_alpha: float | None = None) -> np.ndarray:
    """The activation fused into a producer by the passes, in place.

    ``"Relu"`` is max(y, 0); ``"Clip"`` is min(max(y, 0), activation_max)
    (ReLU6 and its kin, a folded HardSigmoid: only a lower bound of 0 is fused);
    ``"PRelu"`` multiplies negative values by ``activation_slope``, one slope per
    channel (axis 1 of ``y``; a single slope broadcasts); ``"LeakyRelu"`` by
    ``activation_alpha`` (0.01 when absent, ONNX's default).
    """
    if activation is None:
        return y
    if activation == "Relu":
        return np.maximum(y, 0, out=y)
    if activation == "Clip":
        if activation_max is None:
            raise ValueError("fused Clip needs activation_max")
        return np.clip(y, y.dtype.type(0), y.dtype.type(activation_max), out=y)
    if activation == "PRelu":
        if activation_slope is None:
            raise ValueError("fused PRelu needs activation_slope")
        slope = np.asarray(activation_slope, y.dtype).reshape(-1)
        if y.ndim < 2 or slope.size not in (1, y.shape[1]):
            raise ValueError(f"fused PRelu has {slope.size} slopes for {y.shape} "
                             f"(one, or one per channel on axis 1)")
        np.copyto(y, y * per_channel(slope, y), where=y < 0)
        return y
    if activation == "LeakyRelu":
        alpha = 0.01 if activation_alpha is None else activation_alpha
        np.copyto(y, y * y.dtype.type(alpha), where=y < 0)
        return y
    raise ValueError(f"fused activation {activation!r} not in Relu, Clip, PRelu, LeakyRelu")


#: Attributes that describe a fused activation; producers keep them at normalization.
ACTIVATION_ATTRS = ("activation", "activation_max", "activation_slope", "activation_alpha")


def same_shape(inputs: list[Tensor | None], **_: Any) -> list[tuple[int, ...]]:
    """Shape inference of elementwise unary ops: the output has the input's shape."""
    return [tuple(inputs[0].shape)]


def broadcast_shape(inputs: list[Tensor | None], **_: Any) -> list[tuple[int, ...]]:
    """Shape inference of multidirectional (numpy) broadcasting ops."""
    shapes = [tuple(t.shape) for t in inputs if t is not None]
    try:
        return [tuple(int(d) for d in np.broadcast_shapes(*shapes))]
    except ValueError:
        raise ValueError(f"cannot broadcast shapes {shapes}") from None


def norm_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in ``[0, rank)``; negative counts from the end; out of range is an error."""
    if not -rank <= axis < rank:
        raise ValueError(f"{what} {axis} out of range for rank {rank} "
                         f"(allowed {-rank}..{rank - 1})")
    return axis % rank


def const_value(t: Tensor | None, what: str) -> np.ndarray | None:
    """The import-time value of an optional shape-deciding input (``None`` when omitted)."""
    if t is None:
        return None
    if t.data is None:
        raise ValueError(f"{what} input {t.name!r} must be known when the model is loaded "
                         f"(a constant, or computed from constants and shapes)")
    return np.asarray(t.data)
