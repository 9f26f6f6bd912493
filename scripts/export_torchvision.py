"""Export torchvision architectures the zoo does not have to ONNX, for
``scripts/architecture_sweep.py``.

Development script only: it needs ``torch`` and ``torchvision`` in a virtualenv of their
own (the product and the tests never import them)::

    python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.13.0 torchvision onnx
    /tmp/tv/bin/python scripts/export_torchvision.py --out /tmp/archs [NAME ...]

The weights are torchvision's random initialisation (no download); batch-norm
statistics are then gathered from a few forward passes of random images, so that
activations have the ranges of a trained network's rather than growing layer by layer.
What the sweep checks (partition, bit-exactness against the int8 reference, speed) does
not depend on trained weights; accuracy does, and is measured on real models elsewhere.

torchvision wheels built against another torch fail to import (``operator
torchvision::nms does not exist``); the classification and segmentation models need
none of its compiled operators, so their fake-kernel registrations are skipped.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.library

_register_fake = torch.library.register_fake


def _skip_torchvision_ops(name, *args, **kwargs):
    if isinstance(name, str) and name.startswith("torchvision::"):
        return lambda fn: fn
    return _register_fake(name, *args, **kwargs)


torch.library.register_fake = _skip_torchvision_ops
from torchvision import models as M  # noqa: E402  (after the registration shim)

torch.library.register_fake = _register_fake

#: name -> (constructor, input size): sizes small enough for the cmodel, large enough
#: that every stage keeps a map of a few pixels
ARCHITECTURES = {
    "shufflenet_v2_x0_5": (lambda: M.shufflenet_v2_x0_5(), 128),
    "shufflenet_v2_x1_0": (lambda: M.shufflenet_v2_x1_0(), 128),
    "mobilenet_v2": (lambda: M.mobilenet_v2(), 224),
    "mobilenet_v3_small": (lambda: M.mobilenet_v3_small(), 128),
    "mobilenet_v3_large": (lambda: M.mobilenet_v3_large(), 128),
    "efficientnet_b0": (lambda: M.efficientnet_b0(), 128),
    "efficientnet_v2_s": (lambda: M.efficientnet_v2_s(), 128),
    "mnasnet0_5": (lambda: M.mnasnet0_5(), 128),
    "regnet_x_400mf": (lambda: M.regnet_x_400mf(), 128),
    "regnet_y_400mf": (lambda: M.regnet_y_400mf(), 128),
    "squeezenet1_0": (lambda: M.squeezenet1_0(), 128),
    "googlenet": (lambda: M.googlenet(aux_logits=False, init_weights=True), 128),
    "inception_v3": (lambda: M.inception_v3(aux_logits=False, init_weights=True), 160),
    "resnet18": (lambda: M.resnet18(), 128),
    "resnet50": (lambda: M.resnet50(), 128),
    "resnext50_32x4d": (lambda: M.resnext50_32x4d(), 96),
    "densenet121": (lambda: M.densenet121(), 64),
    "alexnet": (lambda: M.alexnet(), 224),
    "convnext_tiny": (lambda: M.convnext_tiny(), 64),
    "lraspp_mobilenet_v3_large": (lambda: M.segmentation.lraspp_mobilenet_v3_large(
        weights=None, weights_backbone=None), 128),
    "deeplabv3_mobilenet_v3_large": (lambda: M.segmentation.deeplabv3_mobilenet_v3_large(
        weights=None, weights_backbone=None, aux_loss=False), 128),
}


class _Main(torch.nn.Module):
    """The model's tensor output (a segmentation model's ``"out"``)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        y = self.model(x)
        return y["out"] if isinstance(y, dict) else y


def export(name: str, out_dir: Path, seed: int = 0) -> Path:
    make, size = ARCHITECTURES[name]
    torch.manual_seed(seed)
    model = make()
    model.train()
    with torch.no_grad():
        for _ in range(4):
            model(torch.rand(8, 3, size, size) * 2 - 1)
    model.eval()
    path = out_dir / f"{name}.onnx"
    torch.onnx.export(_Main(model), torch.rand(1, 3, size, size) * 2 - 1, path,
                      opset_version=13, dynamo=False, input_names=["input"],
                      output_names=["output"])
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", default=list(ARCHITECTURES),
                   help=f"architectures (default all: {', '.join(ARCHITECTURES)})")
    p.add_argument("--out", type=Path, required=True, help="folder for the .onnx files")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in ARCHITECTURES]
    if unknown:
        p.error(f"unknown architecture(s) {', '.join(unknown)}; known: "
                f"{', '.join(ARCHITECTURES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        print(export(name, args.out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
