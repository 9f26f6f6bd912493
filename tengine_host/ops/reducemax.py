"""ReduceMax: maximum over ``axes`` (attribute before opset 18, input after; all axes when
omitted unless ``noop_with_empty_axes``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.reduce import extreme, reduce_infer_shape, reduce_normalize, reduce_with
from tengine_host.ops.registry import register


def _max(x: np.ndarray, axis, keepdims: bool, dtype=None) -> np.ndarray:
    # an empty set reduces to the identity
    return np.max(x, axis=axis, keepdims=keepdims, initial=extreme(x.dtype, lowest=True))


def reduce_max(x: np.ndarray, axes_in: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    return reduce_with(_max, x, axes_in, **attrs)


register("ReduceMax", reduce_max, reduce_infer_shape, reduce_normalize, const_inputs=(1,))
