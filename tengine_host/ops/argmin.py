"""ArgMin: int64 index of the smallest value along ``axis`` (see :mod:`.argmax`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.argmax import arg_extreme, arg_infer_shape, arg_normalize
from tengine_host.ops.registry import register


def arg_min(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return arg_extreme(x, **attrs, pick=np.argmin)


register("ArgMin", arg_min, arg_infer_shape, arg_normalize,
         infer_dtype=lambda inputs, **_: [np.int64])
