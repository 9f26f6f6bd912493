"""ReduceSum: sum over ``axes`` (attribute before opset 13, input after; all axes when
omitted unless ``noop_with_empty_axes``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.reduce import reduce_infer_shape, reduce_normalize, reduce_with
from tengine_host.ops.registry import register


def reduce_sum(x: np.ndarray, axes_in: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    return reduce_with(np.sum, x, axes_in, **attrs)


register("ReduceSum", reduce_sum, reduce_infer_shape, reduce_normalize, const_inputs=(1,))
