"""ONNX -> Graph: constants from initializers and ``Constant`` nodes, attributes
normalized by each op's definition, static shapes and dtypes inferred node by node.

Shape-deciding inputs (Reshape's ``shape``, Resize's ``scales``, ...) must be
known at load time.  Besides constants, the importer knows every value that
follows from constants and static shapes (``Shape -> Gather -> Concat ->
Reshape`` chains): it evaluates such nodes on the spot.  The nodes stay in the
graph (folding them away is a pass's job); only shape inference uses the values.

>>> from tengine_host.frontend import load_onnx
>>> g = load_onnx("tengine_host/models/lenet5_digits.onnx")   # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from accel.ir import Graph, Node, Tensor
from tengine_host.frontend.constants import OnnxImportError, attr_value, constant_value
from tengine_host.frontend.shapes import input_tensor
from tengine_host.ops import OPS, run_op

#: Opsets whose semantics the ops follow (newer opsets load when an op's
#: definition has not changed since; see :func:`load_onnx`).
MIN_OPSET, MAX_OPSET = 7, 21


def load_onnx(model: str | Path | bytes | onnx.ModelProto, *,
              input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """Import an ONNX model as a :class:`Graph` with every tensor shape known.

    Parameters
    ----------
    model : path, bytes or ModelProto
        The model.
    input_shapes : dict, optional
        Input name -> full shape, fixing dynamic dimensions (``--input-shape``).
        A dynamic batch dimension alone defaults to 1; any other dynamic
        dimension left open is an error naming the input.

    Raises
    ------
    OnnxImportError
        The file is missing, truncated or not ONNX; the opset is older than 7;
        an op has no host implementation (the message names op type, node and
        opset); a shape is left dynamic or cannot be inferred.
    """
    proto = read_proto(model)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if opset is None:
        raise OnnxImportError("model declares no default-domain (ai.onnx) opset")
    if opset < MIN_OPSET:
        raise OnnxImportError(f"opset {opset} is older than the oldest supported opset "
                              f"{MIN_OPSET} (re-export the model or convert it with "
                              f"onnx.version_converter)")
    g = proto.graph
    overrides = {k: tuple(int(d) for d in v) for k, v in (input_shapes or {}).items()}
    tensors: dict[str, Tensor] = {}
    known: dict[str, np.ndarray] = {}  # values computable at load time
    for init in g.initializer:
        try:
            data = numpy_helper.to_array(init)
        except Exception as exc:  # noqa: BLE001  (external data missing, bad raw size, ...)
            raise OnnxImportError(f"initializer {init.name!r} cannot be read: {exc}") from exc
        tensors[init.name] = Tensor(init.name, tuple(data.shape), data.dtype, data)
        known[init.name] = data
    graph_inputs = [vi for vi in g.input if vi.name not in tensors]
    unknown = sorted(set(overrides) - {vi.name for vi in graph_inputs})
    if unknown:
        raise OnnxImportError(f"input_shapes names {unknown}, which are not model inputs; "
                              f"inputs: {', '.join(vi.name for vi in graph_inputs)}")
    for vi in graph_inputs:
        tensors[vi.name] = input_tensor(vi, overrides.get(vi.name))
    inputs = [vi.name for vi in graph_inputs]

    nodes: list[Node] = []
    for i, pn in enumerate(g.node):
        name = pn.name or f"{pn.op_type}_{i}"
        if pn.domain not in ("", "ai.onnx"):
            raise OnnxImportError(f"op {pn.domain}::{pn.op_type} (node {name!r}, opset {opset}) "
                                  f"is not implemented on the host")
        if pn.op_type == "Constant":
            data = constant_value(pn, name)
            tensors[pn.output[0]] = Tensor(pn.output[0], tuple(data.shape), data.dtype, data)
            known[pn.output[0]] = data
            continue
        nodes.append(_import_node(pn, name, opset, tensors, known))

    outputs = [vi.name for vi in g.output]
    for t in outputs:
        if t not in tensors:
            raise OnnxImportError(f"graph output {t!r} is not produced by any node")
    return Graph(g.name or "model", nodes, tensors, inputs, outputs)


def _import_node(pn: onnx.NodeProto, name: str, opset: int, tensors: dict[str, Tensor],
                 known: dict[str, np.ndarray]) -> Node:
    """Normalize one node's attributes, infer its outputs, and evaluate it when possible."""
    op = OPS.get(pn.op_type)
    if op is None:
        raise OnnxImportError(f"op {pn.op_type!r} (node {name!r}, opset {opset}) is not "
                              f"implemented on the host; implemented: {', '.join(sorted(OPS))}")
    if opset < op.min_opset:
        raise OnnxImportError(f"op {pn.op_type!r} (node {name!r}) at opset {opset} is older "
                              f"than the supported opset {op.min_opset}")
    missing = [t for t in pn.input if t and t not in tensors]
    if missing:
        raise OnnxImportError(f"node {name!r} ({pn.op_type}) reads {missing}, which no earlier "
                              f"node, input or initializer defines (graph not topologically "
                              f"sorted?)")
    # Shape inference sees load-time values, including computed ones.
    ins = [_with_value(tensors[t], known.get(t)) if t else None for t in pn.input]
    outs = list(pn.output)
    where = f"node {name!r} ({pn.op_type}, opset {opset})"
    for i in op.const_inputs:
        t = ins[i] if i < len(ins) else None
        if t is not None and t.data is None:
            raise OnnxImportError(f"{where}: input {t.name!r} decides the output shape and "
                                  f"must be known when the model is loaded (a constant, or "
                                  f"computed from constants and shapes); this engine has "
                                  f"static shapes")
    try:
        attrs: dict[str, Any] = {a.name: attr_value(a) for a in pn.attribute}
        # Ops whose behaviour depends on how many outputs the node has (Split, MaxPool's
        # Indices) read this during normalization; nothing else keeps it.
        attrs["_n_outputs"] = len(outs)
        attrs = op.normalize(attrs, ins, opset)
        attrs.pop("_n_outputs", None)
        shapes = [tuple(int(d) for d in s) for s in op.infer_shape(ins, **attrs)]
        dtypes = op.output_dtypes(ins, attrs, len(outs))
        values = _evaluate(op, ins, attrs)
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise OnnxImportError(f"{where}: {exc}") from exc
    if len(shapes) < len([t for t in outs if t]):
        raise OnnxImportError(f"{where}: has {len(outs)} outputs, the op defines {len(shapes)}")
    for j, t in enumerate(outs):
        if not t:
            continue
        if values is not None:
            v = np.asarray(values[j])
            if v.shape != shapes[j]:
                raise OnnxImportError(f"{where}: output {t!r} evaluates to shape {v.shape} but "
                                      f"shape inference says {shapes[j]}")
            known[t] = v
            dtypes[j] = v.dtype
        tensors[t] = Tensor(t, shapes[j], np.dtype(dtypes[j]))
    return Node(name, pn.op_type, list(pn.input), outs, attrs)


def _with_value(t: Tensor, value: np.ndarray | None) -> Tensor:
    if value is None or t.data is not None:
        return t
    return Tensor(t.name, t.shape, t.dtype, value)


def _evaluate(op: Any, ins: list[Tensor | None], attrs: dict[str, Any]
              ) -> tuple[np.ndarray, ...] | None:
    """Run the node now when its outputs are known at load time, else ``None``."""
    present = [t for t in ins if t is not None]
    if op.shape_only:
        # Only the shape matters: a zero-stride view stands in for the activation.
        args = [None if t is None else t.data if t.data is not None
                else np.broadcast_to(np.zeros((), t.dtype), t.shape) for t in ins]
    elif present and all(t.data is not None for t in present):
        args = [None if t is None else t.data for t in ins]
    else:
        return None
    return run_op(op.op_type, args, attrs)


def read_proto(model: str | Path | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """The model's protobuf (external data not loaded), checked to hold a graph: an
    :class:`OnnxImportError` naming the file otherwise (missing, corrupt, empty)."""
    if isinstance(model, onnx.ModelProto):
        proto, where = model, "<ModelProto>"
    else:
        if isinstance(model, (str, Path)):
            path = Path(model)
            if not path.is_file():
                raise OnnxImportError(f"ONNX model {str(path)!r} "
                                      + ("is a directory" if path.is_dir() else "does not exist"))
            raw = path.read_bytes()
            where = repr(str(path))
        else:
            raw, where = bytes(model), "<bytes>"
        try:
            proto = onnx.ModelProto.FromString(raw)
        except Exception as exc:  # noqa: BLE001  protobuf's DecodeError and friends
            raise OnnxImportError(f"{where} is not a valid ONNX model (truncated or corrupt): "
                                  f"{exc}") from exc
    if not proto.HasField("graph") or not (proto.graph.node or proto.graph.output):
        raise OnnxImportError(f"{where} holds no ONNX graph (empty, truncated or not ONNX)")
    return proto
