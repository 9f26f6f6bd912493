"""Less: whether ``a`` is less than ``b``, elementwise (bool, broadcast)."""

from __future__ import annotations

import numpy as np

from tengine_host.ops.comparison import register_comparison

register_comparison("Less", np.less)
