"""ReduceMean: mean over ``axes`` (attribute before opset 18, input after; all axes when
omitted unless ``noop_with_empty_axes``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.reduce import reduce_infer_shape, reduce_normalize, reduce_with
from tengine_host.ops.registry import register


def reduce_mean(x: np.ndarray, axes_in: np.ndarray | None = None, **attrs: Any) -> np.ndarray:
    return reduce_with(np.mean, x, axes_in, **attrs)


register("ReduceMean", reduce_mean, reduce_infer_shape, reduce_normalize, const_inputs=(1,))
