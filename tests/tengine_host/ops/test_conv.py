from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.parametrize("attrs, cin, k, group", [
    ({}, 3, 4, 1),
    ({"pads": [1, 2, 0, 1], "strides": [2, 1]}, 3, 5, 1),
    ({"dilations": [2, 2], "pads": [2, 2, 2, 2]}, 2, 3, 1),
    ({"group": 2, "pads": [1, 1, 1, 1]}, 4, 6, 2),
    ({"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}, 4, 4, 4),  # depthwise
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, 3, 2, 1),
])
def test_conv_matches_onnxruntime(against_ort, rng, attrs, cin, k, group):
    x = rng.standard_normal((2, cin, 9, 7)).astype(np.float32)
    w = rng.standard_normal((k, cin // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(k).astype(np.float32)
    attrs = {**attrs, "group": group} if group > 1 else attrs
    got, want = against_ort("Conv", {"x": x}, {"w": w, "b": b}, attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_conv_fused_relu_clamps():
    from tengine_host.ops.conv import conv
    x = np.ones((1, 1, 3, 3), np.float32)
    w = -np.ones((1, 1, 1, 1), np.float32)
    kw = dict(kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1])
    assert (conv(x, w, **kw) == -1).all()
    assert (conv(x, w, activation="Relu", **kw) == 0).all()
