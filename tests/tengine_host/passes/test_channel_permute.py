"""channel_permute: Reshape / Transpose chains that reorder channels become a 1x1
convolution of 0/1 weights, checked against onnxruntime before and after; chains that
move anything else across rows, columns or the batch stay."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import channel_permute
from tests.tengine_host.passes.graphs import check, const, model, node, ops, unchanged

N, C, H, W = 2, 12, 3, 5          # distinct sizes: a wrong map cannot pass


def _chain(steps, shape=(N, C, H, W), extra=(), outputs=("y",)):
    """x -> Relu -> the chain ``steps`` (("Reshape", shape) / ("Transpose", perm)) -> y."""
    nodes, inits, prev = [node("relu", "Relu", ["x"], ["a"])], [], "a"
    for i, (op, arg) in enumerate(steps):
        out = "y" if i == len(steps) - 1 else f"t{i}"
        if op == "Reshape":
            inits.append(const(f"s{i}", np.array(arg, np.int64)))
            nodes.append(node(f"r{i}", "Reshape", [prev, f"s{i}"], [out]))
        else:
            nodes.append(node(f"t{i}", "Transpose", [prev], [out], perm=list(arg)))
        prev = out
    return model([*nodes, *extra], inits, list(shape), outputs=outputs)


def _shuffle(groups, spelling="5d"):
    if spelling == "5d":
        return [("Reshape", [N, groups, C // groups, H, W]), ("Transpose", [0, 2, 1, 3, 4]),
                ("Reshape", [N, C, H, W])]
    # over H * W, with -1 and 0 in the targets
    return [("Reshape", [0, groups, -1, H * W]), ("Transpose", [0, 2, 1, 3]),
            ("Reshape", [N, -1, H, W])]


@pytest.mark.parametrize("groups", [2, 3, 4, 6])
@pytest.mark.parametrize("spelling", ["5d", "flat"])
def test_channel_shuffles_become_permutation_convolutions(groups, spelling):
    g = check(_chain(_shuffle(groups, spelling)), channel_permute.apply)
    assert ops(g) == ["Relu", "Conv"]
    conv = g.nodes[-1]
    w = g.tensors[conv.inputs[1]].data
    assert w.shape == (C, C, 1, 1) and conv.outputs == ["y"]
    p = np.arange(C).reshape(groups, C // groups).T.reshape(-1)
    np.testing.assert_array_equal(w[:, :, 0, 0], np.eye(C, dtype=np.float32)[p])


def test_a_transpose_of_channels_back_again_is_still_a_permutation():
    # [N, C, H, W] -> [N, 3, 4, H, W] -> swap -> [N, 4, 3, H, W] -> C again: a shuffle
    g = check(_chain([("Reshape", [N, 3, 4, H, W]), ("Transpose", [0, 2, 1, 3, 4]),
                      ("Reshape", [N, 4, 3, H, W]), ("Reshape", [N, C, H, W])]),
              channel_permute.apply)
    assert ops(g) == ["Relu", "Conv"]


@pytest.mark.parametrize("shape, steps", [
    # rows and columns trade places (a square map, so the shape comes back)
    ((N, C, 4, 4), [("Transpose", [0, 1, 3, 2])]),
    ((N, C, H, W), [("Reshape", [N, C, W * H]), ("Reshape", [N, C, H, W])]),   # identity
    # channels and rows interleave: not a channel order
    ((N, C, H, W), [("Reshape", [N, C * H, W]), ("Reshape", [N, H, C, W]),
                    ("Transpose", [0, 2, 1, 3])]),
    # the batch mixes into the channels
    ((N, C, H, W), [("Reshape", [1, N * C, H, W]), ("Reshape", [C, N, H, W]),
                    ("Transpose", [1, 0, 2, 3])]),
], ids=["spatial", "identity", "rows", "batch"])
def test_chains_that_do_not_only_reorder_channels_stay(shape, steps):
    unchanged(_chain(steps, shape=shape), channel_permute.apply)


def test_an_intermediate_read_elsewhere_or_returned_stays():
    extra = [node("keep", "Sigmoid", ["t1"], ["z"])]
    unchanged(_chain(_shuffle(3), extra=extra, outputs=("y", "z")), channel_permute.apply)
    unchanged(_chain(_shuffle(3), outputs=("y", "t0")), channel_permute.apply)


def test_channel_order_reports_the_source_channel():
    from tengine_host.frontend import load_onnx

    g = load_onnx(_chain(_shuffle(4)))
    chain = [n for n in g.nodes if n.op_type in ("Reshape", "Transpose")]
    p = channel_permute.channel_order(g, chain, (N, C, H, W))
    x = np.arange(N * C * H * W).reshape(N, C, H, W)
    want = x.reshape(N, 4, 3, H, W).transpose(0, 2, 1, 3, 4).reshape(N, C, H, W)
    np.testing.assert_array_equal(x[:, p], want)
