"""Min: elementwise minimum of any number of inputs, with broadcasting."""

from __future__ import annotations

from functools import reduce

import numpy as np

from tengine_host.ops.registry import broadcast_shape, register


def min_(*xs: np.ndarray) -> np.ndarray:
    return np.asarray(reduce(np.minimum, xs)).astype(xs[0].dtype, copy=False)


register("Min", min_, broadcast_shape)
