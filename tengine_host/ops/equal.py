"""Equal: whether ``a`` is equal ``b``, elementwise (bool, broadcast)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.comparison import register_comparison

register_comparison("Equal", np.equal)
