"""A model zoo built with ``onnx.helper`` and seeded random weights (no torch), used to
check whole-model agreement of the host engine with onnxruntime and to benchmark it.

>>> from tengine_host.zoo import build
>>> model = build("resnet18_cifar")          # an onnx.ModelProto   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from tengine_host.zoo.classic import lenet5, resnet18_cifar, squeezenet1_1
from tengine_host.zoo.mobilenet import mobilenet_v1, mobilenet_v2
from tengine_host.zoo.unet import unet_small
from tengine_host.zoo.yolox import yolox_nano, yolox_nano_silu

MODELS: dict[str, Callable[..., onnx.ModelProto]] = {
    "lenet5": lenet5,
    "resnet18_cifar": resnet18_cifar,
    "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2,
    "squeezenet1_1": squeezenet1_1,
    "yolox_nano": yolox_nano,
    "yolox_nano_silu": yolox_nano_silu,
    "unet_small": unet_small,
}


def build(name: str, seed: int = 0) -> onnx.ModelProto:
    """The zoo model ``name`` with weights drawn from ``seed``."""
    if name not in MODELS:
        raise ValueError(f"zoo model {name!r} not in {', '.join(MODELS)}")
    return MODELS[name](seed=seed)


__all__ = ["MODELS", "build"]
