"""ONNX attribute and ``Constant`` node values as numpy, and the importer's error type."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from tengine_host.errors import TengineInputError


class OnnxImportError(TengineInputError):
    """The ONNX model cannot be imported (bad file, unsupported op, unknown shape)."""


def attr_value(attr: onnx.AttributeProto) -> Any:
    """An attribute as Python/numpy: strings decoded, tensors as arrays."""
    if attr.type == onnx.AttributeProto.GRAPH or attr.type == onnx.AttributeProto.GRAPHS:
        raise ValueError(f"attribute {attr.name!r} holds a subgraph (control flow is not "
                         f"supported)")
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


_SCALARS = {"value_float": np.float32, "value_floats": np.float32,
            "value_int": np.int64, "value_ints": np.int64}


def constant_value(node: onnx.NodeProto, name: str) -> np.ndarray:
    """The value of a ``Constant`` node, whichever attribute carries it."""
    if len(node.attribute) != 1:
        raise OnnxImportError(f"Constant node {name!r} needs exactly one value attribute, has "
                              f"{[a.name for a in node.attribute]}")
    (attr,) = node.attribute
    if attr.name in _SCALARS:
        return np.array(onnx.helper.get_attribute_value(attr), dtype=_SCALARS[attr.name])
    if attr.name == "value":
        return numpy_helper.to_array(attr.t)
    if attr.name == "sparse_value":
        return numpy_helper.to_array(onnx.helper.get_attribute_value(attr).values)
    raise OnnxImportError(f"Constant node {name!r}: attribute {attr.name!r} is not supported "
                          f"(value, value_float(s), value_int(s))")
