"""prune_taps: kernel rows and columns of a convolution that only ever read padding go,
checked against onnxruntime before and after (the outputs keep their size and values)."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import prune_taps
from tests.tengine_host.passes.graphs import check, const, model, node, unchanged

RNG = np.random.default_rng(5)


def _conv(x_shape, k, dil, pads, stride=(1, 1), group=1, cout=4):
    cin = x_shape[1]
    w = RNG.standard_normal((cout, cin // group, *k)).astype(np.float32)
    nodes = [node("conv", "Conv", ["x", "w", "b"], ["y"], kernel_shape=list(k),
                  dilations=list(dil), pads=list(pads), strides=list(stride), group=group)]
    return model(nodes, [const("w", w), const("b", RNG.standard_normal(cout))], list(x_shape))


@pytest.mark.parametrize("x_shape, k, dil, pads, stride, want_k, want_pads", [
    # DeepLab's ASPP at rate 36 on an 8 x 8 map: only the centre tap reads it
    ((1, 6, 8, 8), (3, 3), (36, 36), (36, 36, 36, 36), (1, 1), [1, 1], [0, 0, 0, 0]),
    # rate 6 on a 5 x 7 map: rows lose both outer taps, columns keep all three
    ((1, 6, 5, 7), (3, 3), (6, 6), (6, 6, 6, 6), (1, 1), [1, 3], [0, 6, 0, 6]),
    # a one-row map under a 3x3 kernel: the top and bottom rows read padding only
    ((1, 6, 1, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), [1, 3], [0, 1, 0, 1]),
    # asymmetric padding and a stride: only the bottom taps go
    ((1, 6, 4, 9), (5, 3), (3, 1), (2, 1, 9, 1), (2, 1), [2, 3], [2, 1, 0, 1]),
])
def test_taps_reading_only_padding_go(x_shape, k, dil, pads, stride, want_k, want_pads):
    g = check(_conv(x_shape, k, dil, pads, stride), prune_taps.apply)
    conv = g.nodes[0]
    assert conv.attrs["kernel_shape"] == want_k and conv.attrs["pads"] == want_pads
    assert g.tensors[conv.inputs[1]].shape[2:] == tuple(want_k)


def test_a_depthwise_kernel_is_pruned_per_channel_alike():
    g = check(_conv((1, 6, 8, 8), (3, 3), (12, 12), (12, 12, 12, 12), group=6, cout=6),
              prune_taps.apply)
    assert g.nodes[0].attrs["kernel_shape"] == [1, 1]


@pytest.mark.parametrize("x_shape, k, dil, pads", [
    ((1, 6, 8, 8), (3, 3), (2, 2), (2, 2, 2, 2)),          # every tap reads the map
    ((1, 6, 8, 8), (3, 3), (1, 1), (0, 0, 0, 0)),          # no padding at all
    ((1, 6, 8, 8), (1, 1), (1, 1), (0, 0, 0, 0)),
])
def test_convolutions_whose_taps_all_read_the_map_stay(x_shape, k, dil, pads):
    unchanged(_conv(x_shape, k, dil, pads), prune_taps.apply)
