"""CPU fp32 operators of the host engine, one module per op, registered explicitly.

Importing this package fills :data:`OPS`; each op module below calls
``registry.register`` exactly once.  ``windows``, ``interpolate`` and ``reduce``
are shared helpers, not ops.  Add a new op by writing its module and listing it here.
"""

from __future__ import annotations

from tengine_host.ops import (  # noqa: F401  (imported for their registration)
    add,
    averagepool,
    batchnormalization,
    cast,
    clip,
    concat,
    constantofshape,
    conv,
    convtranspose,
    div,
    dropout,
    erf,
    exp,
    expand,
    flatten,
    gather,
    gemm,
    globalaveragepool,
    globalmaxpool,
    hardsigmoid,
    hardswish,
    identity,
    leakyrelu,
    log,
    lrn,
    matmul,
    max,
    maxpool,
    min,
    mul,
    pad,
    pow,
    prelu,
    range,
    reducemean,
    reducesum,
    relu,
    reshape,
    resize,
    shape,
    sigmoid,
    slice,
    softmax,
    split,
    sqrt,
    squeeze,
    sub,
    swish,
    tanh,
    transpose,
    unsqueeze,
    upsample,
)
from tengine_host.ops.registry import OPS, OpDef, get_op, register, run_op

__all__ = ["OPS", "OpDef", "get_op", "register", "run_op"]
