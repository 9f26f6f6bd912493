"""LeNet-5, ResNet-18 for CIFAR (32x32), SqueezeNet 1.1 (224x224)."""

from __future__ import annotations

import numpy as np
import onnx

from tengine_host.zoo.builder import NetBuilder


def lenet5(seed: int = 0) -> onnx.ModelProto:
    """LeNet-5 on 1x1x28x28 (MNIST layout): two conv/ReLU/max-pool stages, three FCs."""
    b = NetBuilder("lenet5", seed)
    x = b.input("input", (1, 1, 28, 28))
    x = b.maxpool(b.relu(b.conv(x, 6, 5, pad=2)), 2, 2)
    x = b.maxpool(b.relu(b.conv(x, 16, 5, pad=0)), 2, 2)
    x = b.node("Flatten", [x], axis=1)
    for i, n in enumerate((120, 84, 10)):
        fan_in = 400 if i == 0 else (120, 84)[i - 1]
        w = (b.rng.standard_normal((n, fan_in)) * np.sqrt(2 / fan_in)).astype(np.float32)
        x = b.node("Gemm", [x, b.const(w, "fc_w"),
                            b.const((b.rng.standard_normal(n) * 0.05).astype(np.float32),
                                    "fc_b")], n, transB=1)
        if n != 10:
            x = b.relu(x)
    return b.model([b.node("Softmax", [x], axis=1)])


def resnet18_cifar(seed: int = 0) -> onnx.ModelProto:
    """ResNet-18 for 32x32 inputs: a 3x3 stem, four stages of two basic blocks, 10 classes."""
    b = NetBuilder("resnet18_cifar", seed)
    x = b.conv_bn(b.input("input", (1, 3, 32, 32)), 64)
    for i, c in enumerate((64, 128, 256, 512)):
        for j in range(2):
            stride = 2 if i > 0 and j == 0 else 1
            y = b.conv_bn(x, c, 3, stride)
            y = b.conv_bn(y, c, 3, 1, act=None)
            short = x if stride == 1 and b.channels[x] == c else b.conv_bn(x, c, 1, stride,
                                                                          act=None)
            x = b.relu(b.add(y, short))
    return b.model([b.classifier(x, 10)])


def squeezenet1_1(seed: int = 0) -> onnx.ModelProto:
    """SqueezeNet 1.1 on 224x224: fire modules, ceil-mode max pools, conv classifier."""
    b = NetBuilder("squeezenet1_1", seed)
    x = b.relu(b.conv(b.input("input", (1, 3, 224, 224)), 64, 3, 2, pad=0))
    x = b.maxpool(x, 3, 2, ceil_mode=1)

    def fire(t: str, squeeze: int, expand: int) -> str:
        s = b.relu(b.conv(t, squeeze, 1))
        return b.concat([b.relu(b.conv(s, expand, 1)), b.relu(b.conv(s, expand, 3))])

    x = fire(fire(x, 16, 64), 16, 64)
    x = b.maxpool(x, 3, 2, ceil_mode=1)
    x = fire(fire(x, 32, 128), 32, 128)
    x = b.maxpool(x, 3, 2, ceil_mode=1)
    for sq, ex in ((48, 192), (48, 192), (64, 256), (64, 256)):
        x = fire(x, sq, ex)
    x = b.node("Dropout", [x])
    x = b.relu(b.conv(x, 1000, 1))
    x = b.node("Flatten", [b.node("GlobalAveragePool", [x])], axis=1)
    return b.model([b.node("Softmax", [x], axis=1)])
