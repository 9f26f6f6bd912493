"""Not: elementwise logical negation of a bool tensor."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.comparison import bool_dtype
from tengine_host.ops.registry import register, same_shape

register("Not", np.logical_not, same_shape, infer_dtype=bool_dtype)
