"""A small UNet (64x64 input, 3 levels) whose decoder upsamples with Resize: bilinear
(half_pixel) at one level, nearest at the other; skip connections by Concat."""

from __future__ import annotations

import onnx

from tengine_host.zoo.builder import NetBuilder


def unet_small(seed: int = 0, size: int = 64, classes: int = 2) -> onnx.ModelProto:
    b = NetBuilder("unet_small", seed)

    def double(x: str, c: int) -> str:
        return b.conv_bn(b.conv_bn(x, c), c)

    e1 = double(b.input("input", (1, 3, size, size)), 16)
    e2 = double(b.maxpool(e1, 2, 2), 32)
    mid = double(b.maxpool(e2, 2, 2), 64)
    d2 = double(b.concat([b.resize2x(mid, "linear", "half_pixel"), e2]), 32)
    d1 = double(b.concat([b.resize2x(d2, "nearest", "asymmetric"), e1]), 16)
    return b.model([b.conv(d1, classes, 1)])
