"""GreaterOrEqual: whether ``a`` is greater than or equal to ``b``, elementwise (bool,
broadcast)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.comparison import register_comparison

register_comparison("GreaterOrEqual", np.greater_equal)
