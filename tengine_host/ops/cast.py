"""Cast: convert to the ``to`` element type; float8 targets saturate by default (opset 19)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from tengine_host.ops.registry import register, same_shape


def cast(x: np.ndarray, *, to: int, dtype: np.dtype, saturate: int) -> np.ndarray:
    name = dtype.name
    if x.dtype == np.dtype(object) or x.dtype.kind == "U":  # strings
        return x.astype(np.float64).astype(dtype) if dtype.kind == "f" else x.astype(dtype)
    if dtype == np.dtype(object) or dtype.kind == "U":
        return x.astype(str).astype(object)
    if name in _SUB_BYTE_INTS:
        import ml_dtypes  # installed with onnx; knows the 2/4-bit formats

        info = ml_dtypes.iinfo(dtype)
        # Out-of-range values wrap around (two's complement), as onnx's reference does.
        span = int(info.max) - int(info.min) + 1
        r = np.rint(x.astype(np.float64))
        return ((r - info.min) % span + info.min).astype(dtype)
    if saturate and name.startswith(("float8", "float4")) and x.dtype.kind in "fV":
        import ml_dtypes

        big = float(ml_dtypes.finfo(dtype).max)
        # Saturation clips to the largest finite value (infinities included).
        x = np.clip(x.astype(np.float32), -big, big)
    return x.astype(dtype)


_SUB_BYTE_INTS = ("int4", "uint4", "int2", "uint2")


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if "to" not in attrs:
        raise ValueError("Cast needs a 'to' attribute")
    to = int(attrs["to"])
    try:
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to))
    except (KeyError, ValueError, TypeError):
        raise ValueError(f"Cast to ONNX type {to} is not supported") from None
    return {"to": to, "dtype": dtype, "saturate": int(attrs.get("saturate", 1))}


register("Cast", cast, same_shape, normalize,
         infer_dtype=lambda inputs, *, dtype, **_: [dtype])
