"""Graph passes sharing one contract: ``apply(graph) -> bool`` (True when it changed
the graph), repeated by :func:`run_passes` until none changes anything."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from accel.ir import Graph
from tengine_host.passes import (
    channel_permute,
    fold_affine,
    fold_batchnorm,
    fold_constants,
    fold_hardsigmoid,
    fold_transpose,
    fuse_activation,
    fuse_bias,
    fuse_prelu,
    global_reduce,
    lift_1d,
    match_hard_activations,
    match_mish,
    match_swish,
    prune_taps,
    remove_identity,
    space_depth,
    split_concat,
    split_variadic,
)

Pass = Callable[[Graph], bool]

#: The default pipeline, in order: clean up, fold what is known, then shape the
#: graph into the conv/FC + bias + activation layers NVDLA runs.  Spelled-out
#: HardSigmoid / HardSwish are recognized before affine folding (which would
#: otherwise take their ``+ 3`` into a convolution's bias), ``x * sigmoid(x)``
#: becomes one Swish and ``x * tanh(softplus(x))`` one Mish, affine ops fold into
#: convolutions before activations fuse into them (never across one), and a
#: HardSigmoid folds into its convolution before the plain Clip/ReLU fusions.  A
#: Split of what Concats just joined is taken apart first (each branch keeps its scale).
#: A Transpose flattened into a fully-connected layer folds into its weights once
#: MatMuls are Gemms (the DLA reads the untransposed cube).  A spatial ReduceMean is a
#: global average pool, a Reshape / Transpose chain that reorders channels a 1x1
#: convolution, and kernel taps that only read padding are dropped.  Sum / Max / Min of
#: three or more tensors (and Mean) are chains of two-input nodes first; DepthToSpace
#: and SpaceToDepth are (transposed) convolutions of 0/1 weights; 1-D layers are 2-D
#: ones of height 1 once batch norms have folded into their convolutions.
DEFAULT_PASSES: tuple[Pass, ...] = (
    split_variadic.apply, remove_identity.apply, fold_constants.apply, global_reduce.apply,
    channel_permute.apply, space_depth.apply, split_concat.apply, fold_batchnorm.apply,
    prune_taps.apply, lift_1d.apply, match_hard_activations.apply, match_swish.apply,
    match_mish.apply, fold_affine.apply, fuse_bias.apply, fold_transpose.apply,
    fold_hardsigmoid.apply, fuse_activation.apply, fuse_prelu.apply)


def run_passes(graph: Graph, passes: Sequence[Pass] = DEFAULT_PASSES,
               max_rounds: int = 100) -> int:
    """Apply ``passes`` in order, round after round, until a round changes nothing.

    Returns the number of rounds that changed the graph.  ``max_rounds`` guards
    against a pass that never settles.
    """
    for rounds in range(max_rounds):
        changed = False
        for p in passes:
            changed |= bool(p(graph))
        if not changed:
            return rounds
    raise RuntimeError(f"passes did not settle after {max_rounds} rounds")


__all__ = ["DEFAULT_PASSES", "Pass", "channel_permute", "fold_affine", "fold_batchnorm",
           "fold_constants", "fold_hardsigmoid", "fold_transpose", "fuse_activation",
           "fuse_bias", "fuse_prelu", "global_reduce", "lift_1d", "match_hard_activations",
           "match_mish", "match_swish", "prune_taps", "remove_identity", "run_passes",
           "space_depth", "split_concat", "split_variadic"]
