"""CPU fp32 operators of the host engine, one module per op, registered explicitly.

Importing this package fills :data:`OPS`; each module below calls
``registry.register`` once.  Add a new op by writing its module and listing it here.
"""

from __future__ import annotations

from tengine_host.ops import (  # noqa: F401  (imported for their registration)
    add,
    conv,
    dropout,
    flatten,
    gemm,
    identity,
    maxpool,
    relu,
    reshape,
    softmax,
)
from tengine_host.ops.registry import OPS, OpDef, get_op, register, run_op

__all__ = ["OPS", "OpDef", "get_op", "register", "run_op"]
