"""Dropout at inference: the input unchanged, and an all-true mask for the optional output.

``training_mode`` (opset 12+ input) with a ratio above 0 draws random numbers,
which no test can reproduce; it is rejected instead of silently ignored.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def dropout(x: np.ndarray, ratio: np.ndarray | None = None, training_mode: np.ndarray | None = None,
            **_: Any) -> tuple[np.ndarray, np.ndarray]:
    if training_mode is not None and bool(np.asarray(training_mode)):
        if ratio is None or float(np.asarray(ratio)) != 0.0:
            raise ValueError("Dropout with training_mode=True and a ratio above 0 is random "
                             "(not an inference op)")
    return x, np.ones(x.shape, dtype=bool)


def normalize(attrs: dict[str, Any], inputs, opset: int) -> dict[str, Any]:
    if int(attrs.get("is_test", 1)) == 0 and opset < 7:
        raise ValueError("Dropout with is_test=0 is a training op")
    return {}


register("Dropout", dropout, lambda inputs, **_: [inputs[0].shape, inputs[0].shape], normalize,
         infer_dtype=lambda inputs, **_: [inputs[0].dtype, np.bool_])
