"""Train LeNet-5 on the project's 5000-image MNIST subset and export it to ONNX.

Development script only: it needs ``torch`` (``.venv/bin/pip install torch``),
which the product and the tests never import.  The result is committed as
``tengine_host/models/lenet5_mnist.onnx`` and used by the int8 accuracy tests.

Data: ``../shared/data/mnist_5k.csv.gz``, one image per row: 784 pixel values
(0..255, row-major 28x28) and the label as the last column.  The file is
sorted by label (500 images per digit), so "first 4000 train / last 1000
test" is taken per class: the first 400 images of each digit train, the last
100 of each digit are the held-out test set (a plain head/tail split would
test on 8s and 9s only).  Pixels are scaled to ``pixel / 255``.  Usage::

    .venv/bin/python scripts/train_lenet_mnist.py [--epochs 15] [--out PATH]
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "mnist_5k.csv.gz"
DEFAULT_OUT = ROOT / "tengine_host" / "models" / "lenet5_mnist.onnx"
TRAIN_PER_CLASS = 400
SEED = 0


def load_split(path: Path = DATA) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test), x float32 [N, 1, 28, 28] in [0, 1].

    The same split as ``tests/tengine_host/quant/test_mnist_int8.py``.
    """
    with gzip.open(path, "rt") as f:
        rows = np.loadtxt(f, delimiter=",", dtype=np.int64)
    x = (rows[:, :784].astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    y = rows[:, 784]
    train = np.zeros(len(y), dtype=bool)
    for digit in range(10):
        idx = np.flatnonzero(y == digit)
        train[idx[:TRAIN_PER_CLASS]] = True
    return x[train], y[train], x[~train], y[~train]


class LeNet5(nn.Module):
    """The classic LeNet-5 layout with ReLU and max pooling (28x28 input, padded first conv)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # a shared 2-core machine
    rng = np.random.default_rng(SEED)
    x_train, y_train, x_test, y_test = load_split()
    model = LeNet5()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for epoch in range(args.epochs):
        model.train()
        for idx in np.array_split(rng.permutation(len(xt)), len(xt) // 32):
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            acc = (model(torch.from_numpy(x_test)).argmax(1).numpy() == y_test).mean()
        print(f"epoch {epoch + 1}: loss {loss.item():.4f} test accuracy {acc:.4f}")

    # Softmax is part of the exported graph so the model outputs probabilities;
    # the batch dimension is symbolic so any batch runs.
    exported = nn.Sequential(model, nn.Softmax(dim=1)).eval()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(exported, torch.zeros(1, 1, 28, 28), str(args.out), opset_version=13,
                      input_names=["input"], output_names=["probs"], dynamo=False,
                      dynamic_axes={"input": {0: "batch"}, "probs": {0: "batch"}})
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
