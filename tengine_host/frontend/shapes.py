"""Static input shapes: dynamic ONNX dimensions fixed by the caller (``--input-shape``)."""

from __future__ import annotations

import numpy as np
import onnx

from accel.ir import Tensor
from tengine_host.frontend.constants import OnnxImportError


def input_tensor(vi: onnx.ValueInfoProto, override: tuple[int, ...] | None) -> Tensor:
    """The graph input ``vi`` as a Tensor with every dimension known.

    ``override`` fixes dynamic dimensions and must agree with the static ones.
    A dynamic first (batch) dimension alone defaults to 1.
    """
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or tt.elem_type == 0:
        raise OnnxImportError(f"input {vi.name!r} is not a typed tensor (sequences, maps and "
                              f"untyped inputs are not supported)")
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    if not tt.HasField("shape"):
        if override is None:
            raise OnnxImportError(f"input {vi.name!r} has no shape in the model; pass its shape "
                                  f"(--input-shape {vi.name}=d0,d1,...)")
        return Tensor(vi.name, override, dtype)
    # dim_value 0 is a real (empty) dimension; negative values are exporters' "unknown".
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None
            for d in tt.shape.dim]
    shown = ",".join(str(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0
                     else (d.dim_param or "?") for d in tt.shape.dim)
    if override is not None:
        if len(override) != len(dims) or any(
                a is not None and a != b for a, b in zip(dims, override, strict=True)):
            raise OnnxImportError(f"input shape {vi.name}={','.join(map(str, override))} does "
                                  f"not fit the model's [{shown}]")
        if any(d < 0 for d in override):
            raise OnnxImportError(f"input shape {vi.name}={','.join(map(str, override))} has a "
                                  f"negative dimension")
        return Tensor(vi.name, override, dtype)
    if dims and dims[0] is None and all(d is not None for d in dims[1:]):
        return Tensor(vi.name, (1, *dims[1:]), dtype)
    if any(d is None for d in dims):
        raise OnnxImportError(f"input {vi.name!r} has dynamic dimensions [{shown}]; fix them with "
                              f"--input-shape {vi.name}=d0,d1,...")
    return Tensor(vi.name, tuple(dims), dtype)
