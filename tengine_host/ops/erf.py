"""Erf: the Gauss error function (scipy's, which scikit-learn already requires)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.registry import register, same_shape


def erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf as _erf  # imported on first use: scipy loads slowly

    return _erf(x).astype(x.dtype, copy=False)


register("Erf", erf, same_shape)
