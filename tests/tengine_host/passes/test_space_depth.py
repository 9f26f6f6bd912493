"""space_depth: DepthToSpace and SpaceToDepth (both modes) become (transposed)
convolutions of 0/1 weights, checked against onnxruntime before and after."""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.passes import space_depth
from tests.tengine_host.passes.graphs import check, model, node, ops


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("b", [2, 3])
def test_depth_to_space_is_a_transposed_convolution(mode, b):
    m = model([node("relu", "Relu", ["x"], ["a"]),
               node("d2s", "DepthToSpace", ["a"], ["y"], blocksize=b, mode=mode)],
              [], [1, 2 * b * b, 3, 4], opset=13)
    g = check(m, space_depth.apply)
    assert ops(g) == ["Relu", "ConvTranspose"] and g.tensors["y"].shape == (1, 2, 3 * b, 4 * b)


@pytest.mark.parametrize("b", [2, 4])
def test_space_to_depth_is_a_strided_convolution(b):
    m = model([node("relu", "Relu", ["x"], ["a"]),
               node("s2d", "SpaceToDepth", ["a"], ["y"], blocksize=b)],
              [], [1, 3, 2 * b, 3 * b], opset=13)
    g = check(m, space_depth.apply)
    assert ops(g) == ["Relu", "Conv"] and g.tensors["y"].shape == (1, 3 * b * b, 2, 3)


def test_source_channel_follows_onnx_both_modes():
    # DCR: offset-major; CRD: channel-major (ONNX's DepthToSpace definition's reshapes)
    c, b, x = 3, 2, np.arange(12 * 2 * 2).reshape(1, 12, 2, 2)
    dcr = x.reshape(1, b, b, c, 2, 2).transpose(0, 3, 4, 1, 5, 2).reshape(1, c, 4, 4)
    crd = x.reshape(1, c, b, b, 2, 2).transpose(0, 1, 4, 2, 5, 3).reshape(1, c, 4, 4)
    for out, mode in ((dcr, "DCR"), (crd, "CRD")):
        for ch in range(c):
            for dy in range(b):
                for dx in range(b):
                    src = space_depth.source_channel(ch, dy, dx, b, c, mode)
                    np.testing.assert_array_equal(out[0, ch, dy::b, dx::b], x[0, src])
