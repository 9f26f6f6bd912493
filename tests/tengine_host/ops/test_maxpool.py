from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("attrs", [
    {"kernel_shape": [2, 2], "strides": [2, 2]},
    {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
    {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1},
    {"kernel_shape": [2, 2], "dilations": [2, 1]},
])
def test_maxpool_matches_onnxruntime(against_ort, rng, attrs):
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)
    got, want = against_ort("MaxPool", {"x": x}, attrs=attrs)
    np.testing.assert_array_equal(got, want)


def test_padding_never_wins_on_negative_input(against_ort):
    x = -np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    got, want = against_ort("MaxPool", {"x": x}, attrs={"kernel_shape": [2, 2],
                                                        "pads": [1, 1, 1, 1], "strides": [2, 2]})
    assert got[0, 0, 0, 0] == -1.0  # hand: the corner window holds only x[0,0] = -1
    np.testing.assert_array_equal(got, want)
