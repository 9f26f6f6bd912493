"""MobileNet v1 and v2 (224x224, 1000 classes, width 1.0)."""

from __future__ import annotations

import onnx

from tengine_host.zoo.builder import NetBuilder


def mobilenet_v1(seed: int = 0) -> onnx.ModelProto:
    """MobileNet v1: a 3x3 stem, then 13 depthwise-separable (3x3 dw + 1x1) blocks."""
    b = NetBuilder("mobilenet_v1", seed)
    x = b.conv_bn(b.input("input", (1, 3, 224, 224)), 32, 3, 2)
    plan = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5,
            (1024, 2), (1024, 1)]
    for c, s in plan:
        x = b.conv_bn(x, b.channels[x], 3, s, group=b.channels[x])
        x = b.conv_bn(x, c, 1)
    return b.model([b.classifier(x, 1000, softmax=True)])


def mobilenet_v2(seed: int = 0) -> onnx.ModelProto:
    """MobileNet v2: inverted residual blocks with ReLU6 (Clip) and linear bottlenecks."""
    b = NetBuilder("mobilenet_v2", seed)
    x = b.conv_bn(b.input("input", (1, 3, 224, 224)), 32, 3, 2, act="relu6")
    # (expansion t, channels c, repeats n, first stride s), as in the paper.
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            cin = b.channels[x]
            y = b.conv_bn(x, cin * t, 1, act="relu6") if t != 1 else x
            y = b.conv_bn(y, b.channels[y], 3, stride, group=b.channels[y], act="relu6")
            y = b.conv_bn(y, c, 1, act=None)
            x = b.add(x, y) if stride == 1 and cin == c else y
    x = b.conv_bn(x, 1280, 1, act="relu6")
    return b.model([b.classifier(x, 1000)])
