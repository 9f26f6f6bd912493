"""Dropout at inference: the input unchanged, and an all-true mask for the optional output."""

from __future__ import annotations

from typing import Any

import numpy as np

from tengine_host.ops.registry import register


def dropout(x: np.ndarray, ratio: np.ndarray | None = None, training_mode: np.ndarray | None = None,
            **_: Any) -> tuple[np.ndarray, np.ndarray]:
    if training_mode is not None and bool(np.asarray(training_mode)):
        raise ValueError("Dropout with training_mode=True is not an inference op")
    return x, np.ones(x.shape, dtype=bool)


register("Dropout", dropout, lambda inputs, **_: [inputs[0].shape, inputs[0].shape])
