"""Loadables the board tests run: LeNet-5 with real digits, and a two-convolution model small
enough to move over a simulated UART in seconds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

from opendla.cli import main

LENET = Path(__file__).resolve().parents[2] / "tengine_host" / "models" / "lenet5_digits.onnx"


def compile_lenet(out: Path, digits: int = 1) -> tuple[Path, Path]:
    """Calibrate on 32 training digits, compile into ``out``; returns the loadable and an
    ``.npy`` of the last ``digits`` digits as int8 (pixels in [0, 1] at scale 1/127)."""
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate, save_table

    x = (load_digits().images / 16.0).astype(np.float32)[:, None]
    save_table(calibrate(load_model(str(LENET)), [{"input": s[None]} for s in x[:32]],
                         progress=False), out / "calib.json")
    assert main(["compile", str(LENET), "--calib", str(out / "calib.json"), "-o", str(out)]) == 0
    (loadable,) = out.glob("*.nvdla")
    q = np.clip(np.round(x[-digits:] * 127), -128, 127).astype(np.int8)
    np.save(out / "q.npy", q)
    return loadable, out / "q.npy"


def compile_tiny(out: Path) -> tuple[Path, Path]:
    """Conv 3x3 (4 -> 10 channels, padding 1) + ReLU, conv 1x1 (10 -> 9): channel counts off
    nv_small's atom of 8, seeded weights; calibrated on 4 random inputs and compiled into
    ``out``.  Returns the loadable and one int8 input as ``.npy``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from tengine_host.model import load_model
    from tengine_host.quant import calibrate, save_table

    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (10, 4, 3, 3)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.normal(0, 0.1, 10).astype(np.float32), "b1"),
             numpy_helper.from_array(rng.normal(0, 0.3, (9, 10, 1, 1)).astype(np.float32), "w2")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["y"])]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 6, 6])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 9, 6, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, out / "tiny.onnx")
    samples = [{"x": rng.normal(0, 1, (1, 4, 6, 6)).astype(np.float32)} for _ in range(4)]
    save_table(calibrate(load_model(str(out / "tiny.onnx")), samples, progress=False),
               out / "calib.json")
    assert main(["compile", str(out / "tiny.onnx"), "--calib", str(out / "calib.json"),
                 "-o", str(out)]) == 0
    (loadable,) = out.glob("*.nvdla")
    np.save(out / "q.npy", rng.integers(-128, 128, (1, 4, 6, 6)).astype(np.int8))
    return loadable, out / "q.npy"
