"""ONNX -> Graph: constants from initializers and ``Constant`` nodes, attributes
normalized by each op's definition, static shapes inferred node by node.

>>> from tengine_host.frontend import load_onnx
>>> g = load_onnx("tengine_host/models/lenet5_digits.onnx")   # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from tengine_host.ir import Graph, Node, Tensor
from tengine_host.ops import OPS


class OnnxImportError(ValueError):
    """The ONNX model cannot be imported (bad file, unsupported op, unknown shape)."""


def _attr_value(attr: onnx.AttributeProto) -> Any:
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    """The value of a ``Constant`` node, whichever attribute carries it."""
    (attr,) = node.attribute
    value = _attr_value(attr)
    if attr.name in ("value_float", "value_int"):
        return np.array(value, dtype=np.float32 if attr.name == "value_float" else np.int64)
    if attr.name in ("value_floats", "value_ints"):
        return np.array(value, dtype=np.float32 if attr.name == "value_floats" else np.int64)
    if attr.name == "value":
        return value
    raise OnnxImportError(f"Constant node {node.name!r}: attribute {attr.name!r} is not supported")


def _static_shape(vi: onnx.ValueInfoProto, overrides: dict[str, tuple[int, ...]]
                  ) -> tuple[int, ...]:
    if vi.name in overrides:
        return tuple(overrides[vi.name])
    dims = vi.type.tensor_type.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
    if any(d <= 0 for d in shape):
        # A symbolic batch dimension defaults to 1; any other unknown needs the caller.
        if shape and shape[0] <= 0 and all(d > 0 for d in shape[1:]):
            return (1, *shape[1:])
        raise OnnxImportError(f"input {vi.name!r} has a dynamic shape "
                           f"{[d.dim_param or d.dim_value for d in dims]}; pass input_shapes")
    return shape


def load_onnx(model: str | Path | bytes | onnx.ModelProto, *,
              input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Import an ONNX model as a :class:`Graph` with every tensor shape known.

    Parameters
    ----------
    model : path, bytes or ModelProto
        The model.
    input_shapes : dict, optional
        Shapes for inputs with dynamic dimensions (a dynamic batch alone defaults to 1).

    Raises
    ------
    OnnxImportError
        The file is missing, truncated or not ONNX; an op has no host
        implementation (the message names op type, node and opset); or a shape
        cannot be inferred.
    """
    proto = _read(model)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise OnnxImportError("model declares no default-domain (ai.onnx) opset")
    g = proto.graph
    overrides = dict(input_shapes or {})
    tensors: dict[str, Tensor] = {}
    for init in g.initializer:
        data = numpy_helper.to_array(init)
        tensors[init.name] = Tensor(init.name, tuple(data.shape), data.dtype, data)
    inputs = []
    for vi in g.input:
        if vi.name in tensors:  # old exporters list initializers as inputs too
            continue
        elem = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        tensors[vi.name] = Tensor(vi.name, _static_shape(vi, overrides), np.dtype(elem))
        inputs.append(vi.name)

    nodes: list[Node] = []
    for i, pn in enumerate(g.node):
        name = pn.name or f"{pn.op_type}_{i}"
        if pn.domain not in ("", "ai.onnx"):
            raise OnnxImportError(f"node {name!r}: op {pn.domain}::{pn.op_type} (opset {opset}) "
                               f"is not implemented on the host")
        if pn.op_type == "Constant":
            data = _constant_value(pn)
            tensors[pn.output[0]] = Tensor(pn.output[0], tuple(data.shape), data.dtype, data)
            continue
        op = OPS.get(pn.op_type)
        if op is None:
            raise OnnxImportError(f"op {pn.op_type!r} (node {name!r}, opset {opset}) is not "
                               f"implemented on the host; implemented: {', '.join(sorted(OPS))}")
        if opset < op.min_opset:
            raise OnnxImportError(f"op {pn.op_type!r} (node {name!r}) at opset {opset} is older "
                               f"than the supported opset {op.min_opset}")
        ins = [tensors.get(t) if t else None for t in pn.input]
        missing = [t for t, v in zip(pn.input, ins, strict=True) if t and v is None]
        if missing:
            raise OnnxImportError(f"node {name!r} ({pn.op_type}) reads {missing}, which no earlier "
                               f"node, input or initializer defines (graph not topologically "
                               f"sorted?)")
        attrs = {a.name: _attr_value(a) for a in pn.attribute}
        try:
            attrs = op.normalize(attrs, ins, opset)
            shapes = op.infer_shape(ins, **attrs)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise OnnxImportError(f"node {name!r} ({pn.op_type}, opset {opset}): {exc}") from exc
        outs = list(pn.output)
        for t, shape in zip(outs, shapes, strict=False):
            if t:
                tensors[t] = Tensor(t, tuple(int(d) for d in shape), np.dtype(np.float32))
        nodes.append(Node(name, pn.op_type, list(pn.input), outs, attrs))

    outputs = [vi.name for vi in g.output]
    for t in outputs:
        if t not in tensors:
            raise OnnxImportError(f"graph output {t!r} is not produced by any node")
    return Graph(g.name or "model", nodes, tensors, inputs, outputs)


def _read(model: str | Path | bytes | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, Path)):
        path = Path(model)
        if not path.is_file():
            raise OnnxImportError(f"ONNX model {str(path)!r} does not exist")
        raw = path.read_bytes()
        where = repr(str(path))
    else:
        raw, where = bytes(model), "<bytes>"
    try:
        proto = onnx.ModelProto.FromString(raw)
    except Exception as exc:  # protobuf raises DecodeError or RuntimeWarning-ish errors
        raise OnnxImportError(f"{where} is not a valid ONNX model (truncated or corrupt): "
                           f"{exc}") from exc
    if not proto.HasField("graph") or not proto.graph.node:
        raise OnnxImportError(f"{where} holds no ONNX graph (empty, truncated or not ONNX)")
    return proto
