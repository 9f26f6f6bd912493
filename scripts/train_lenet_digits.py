"""Train the demo LeNet-5 on scikit-learn's bundled 8x8 digits and export it to ONNX.

Development script only: it needs ``torch`` (``.venv/bin/pip install torch``),
which the product never imports.  The result is committed as
``tengine_host/models/lenet5_digits.onnx``.

Data: ``sklearn.datasets.load_digits`` (1797 images, 8x8, pixel values 0..16),
scaled to ``pixel / 16``.  The LAST 360 digits are the held-out test set, the
rest train.  Usage::

    .venv/bin/python scripts/train_lenet_digits.py [--epochs 60] [--out PATH]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

TEST_COUNT = 360
SEED = 0
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "tengine_host" / "models" / "lenet5_digits.onnx"


def load_split() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_test, y_test) with x as float32 [N, 1, 8, 8] in [0, 1]."""
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = digits.target.astype(np.int64)
    return x[:-TEST_COUNT], y[:-TEST_COUNT], x[-TEST_COUNT:], y[-TEST_COUNT:]


class LeNet5(nn.Module):
    """LeNet-5 shaped for 8x8 inputs (two conv+pool stages, three FC layers)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
            nn.Linear(84, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    x_train, y_train, x_test, y_test = load_split()
    model = LeNet5()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    for epoch in range(args.epochs):
        model.train()
        for idx in np.array_split(rng.permutation(len(xt)), len(xt) // 64):
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}")

    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(x_test)).argmax(1).numpy()
    print(f"test accuracy (last {TEST_COUNT} digits): {np.mean(pred == y_test):.4f}")

    # Softmax is part of the exported graph so the model outputs probabilities.
    exported = nn.Sequential(model, nn.Softmax(dim=1)).eval()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(exported, torch.zeros(1, 1, 8, 8), str(args.out), opset_version=13,
                      input_names=["input"], output_names=["probs"], dynamo=False)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
