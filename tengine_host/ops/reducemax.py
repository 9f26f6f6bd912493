"""ReduceMax: maximum over ``axes`` (attribute before opset 18, input after; all axes when
omitted unless ``noop_with_empty_axes``); an empty set gives the dtype's identity."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.reduce import extreme_reduction, reduce_infer_shape, reduce_normalize
from tengine_host.ops.registry import register

register("ReduceMax", extreme_reduction(np.max, lowest=True), reduce_infer_shape, reduce_normalize,
         const_inputs=(1,))
