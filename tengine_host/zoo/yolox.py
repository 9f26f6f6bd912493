"""YOLOX-nano as the seed's Tengine port ran it: ReLU activations, a plain stride-2 conv
stem instead of Focus, 416x416 input; CSPDarknet (depth 0.33, width 0.25, depthwise
convs) + PAFPN + decoupled heads, decoded to ``[1, anchors, 85]`` (box, obj, 80 classes).

``yolox_nano_silu`` is the same network with YOLOX's own activation, SiLU
(``x * sigmoid(x)``, exported as Sigmoid + Mul), the detector NVDLA runs
through the SDP lookup table on presets that have one."""

from __future__ import annotations

import numpy as np
import onnx

from tengine_host.zoo.builder import NetBuilder


def _cbn(b: NetBuilder, x: str, cout: int, k: int = 3, stride: int = 1,
         group: int = 1) -> str:
    """Conv + BatchNorm + the network's activation (``b.act``)."""
    return b.conv_bn(x, cout, k, stride, group=group, act=b.act)


def _dwconv(b: NetBuilder, x: str, cout: int, stride: int = 1) -> str:
    """Depthwise 3x3 + pointwise 1x1, each with BatchNorm and the activation."""
    x = _cbn(b, x, b.channels[x], 3, stride, group=b.channels[x])
    return _cbn(b, x, cout, 1)


def _csp(b: NetBuilder, x: str, cout: int, n: int, shortcut: bool = True) -> str:
    hidden = cout // 2
    x1 = _cbn(b, x, hidden, 1)
    x2 = _cbn(b, x, hidden, 1)
    for _ in range(n):
        y = _dwconv(b, _cbn(b, x1, hidden, 1), hidden)
        x1 = b.add(y, x1) if shortcut else y
    return _cbn(b, b.concat([x1, x2]), cout, 1)


def _spp(b: NetBuilder, x: str, cout: int) -> str:
    x = _cbn(b, x, b.channels[x] // 2, 1)
    pools = [b.maxpool(x, k, 1, pad=k // 2) for k in (5, 9, 13)]
    return _cbn(b, b.concat([x, *pools]), cout, 1)


def yolox_nano_silu(seed: int = 0, size: int = 416, classes: int = 80) -> onnx.ModelProto:
    return yolox_nano(seed, size, classes, act="silu")


def yolox_nano(seed: int = 0, size: int = 416, classes: int = 80,
               act: str = "relu") -> onnx.ModelProto:
    b = NetBuilder(f"yolox_nano_{act}", seed)
    b.act = act
    x = _cbn(b, b.input("images", (1, 3, size, size)), 16, 3, 2)  # no Focus
    x = _csp(b, _dwconv(b, x, 32, 2), 32, 1)
    d3 = _csp(b, _dwconv(b, x, 64, 2), 64, 3)
    d4 = _csp(b, _dwconv(b, d3, 128, 2), 128, 3)
    d5 = _csp(b, _spp(b, _dwconv(b, d4, 256, 2), 256), 256, 1, shortcut=False)
    # PAFPN
    lat0 = _cbn(b, d5, 128, 1)
    p4 = _csp(b, b.concat([b.resize2x(lat0), d4]), 128, 1, shortcut=False)
    red1 = _cbn(b, p4, 64, 1)
    p3 = _csp(b, b.concat([b.resize2x(red1), d3]), 64, 1, shortcut=False)
    n3 = _csp(b, b.concat([_dwconv(b, p3, 64, 2), red1]), 128, 1, shortcut=False)
    n4 = _csp(b, b.concat([_dwconv(b, n3, 128, 2), lat0]), 256, 1, shortcut=False)
    # Decoupled heads: per level [reg(4), sigmoid(obj), sigmoid(cls)] -> [1, 85, H*W].
    levels = []
    for feat in (p3, n3, n4):
        stem = _cbn(b, feat, 64, 1)
        cls = _dwconv(b, _dwconv(b, stem, 64), 64)
        reg = _dwconv(b, _dwconv(b, stem, 64), 64)
        out = b.concat([b.conv(reg, 4, 1), b.node("Sigmoid", [b.conv(reg, 1, 1)]),
                        b.node("Sigmoid", [b.conv(cls, classes, 1)])])
        shape = b.const(np.array([1, 5 + classes, -1], np.int64), "shape")
        levels.append(b.node("Reshape", [out, shape]))
    y = b.node("Concat", levels, axis=2)
    return b.model([b.node("Transpose", [y], perm=[0, 2, 1])])
