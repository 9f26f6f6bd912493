"""``opendla demo``: the LeNet digits demo end to end on the cmodel, and its checker.

Expected values come from outside the demo: labels from scikit-learn,
predictions from onnxruntime run here, layer output sizes from the model's
architecture (scripts/train_lenet_digits.py), and hand-computed int8 sums.
"""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main
from opendla.commands import demo

# LeNet-5 for 8x8 digits: conv 5x5 pad 2 -> 6x8x8, pool, conv 3x3 pad 1 -> 16x4x4, pool,
# flatten, FC 64->120->84->10.  Values of each DLA tensor per image:
LAYER_OUT = {"Conv": [6 * 8 * 8, 16 * 4 * 4], "MaxPool": [6 * 4 * 4, 16 * 2 * 2],
             "Flatten": [64], "Gemm": [120, 84, 10]}


def _held_out(n: int) -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[-360:][:n, None]
    return x, d.target[-360:][:n]


def test_demo_json_limit_8_is_bit_exact(capsys):
    assert main(["demo", "--limit", "8", "--calib-samples", "50", "--json", "--no-progress"]) == 0
    s = json.loads(capsys.readouterr().out)
    x, y = _held_out(8)
    sess = ort.InferenceSession(str(demo.MODEL), providers=["CPUExecutionProvider"])
    ort_pred = np.array([sess.run(None, {"input": xi[None]})[0].argmax() for xi in x])

    assert s["images"] == 8 and s["preset"] == "nv_small" and s["calib_samples"] == 50
    fp32, onnx_row, ref_row, dla = s["paths"]
    assert [r["path"] for r in s["paths"]] == ["fp32 CPU", "onnxruntime", "int8 CPU reference",
                                              "int8 DLA nv_small cmodel"]
    assert onnx_row["correct"] == int(np.sum(ort_pred == y)) and onnx_row["total"] == 8
    # Our fp32 interpreter and onnxruntime are independent implementations of the same graph.
    assert s["fp32_onnxruntime_agree"] == 8 and fp32["correct"] == onnx_row["correct"]
    assert 0 <= dla["correct"] <= 8 and dla["dla_ms_per_image"] <= dla["ms_per_image"]
    assert s["dla_fp32_agree"] >= 7  # int8 may flip a borderline digit, not several
    assert s["dla_int8_ref_agree"] == 8 and ref_row["correct"] == dla["correct"]

    # Every layer ran on the DLA and every tensor was checked on every image, byte for byte.
    ops = [c["op_type"] for c in s["layers"]]
    assert ops == ["Conv", "MaxPool", "Conv", "MaxPool", "Flatten", "Gemm", "Gemm", "Gemm"]
    for op, sizes in LAYER_OUT.items():
        got = [c["total_bytes"] for c in s["layers"] if c["op_type"] == op]
        assert got == [8 * n for n in sizes]
    assert all(c["images"] == 8 and c["bad_bytes"] == 0 for c in s["layers"])
    assert s["bit_exact"] is True
    # Softmax has no DLA lowering: the whole network is one DLA subgraph, then the CPU.
    assert (s["subgraphs"], s["dla_subgraphs"]) == (2, 1)
    assert s["partition"][0] == "2 subgraph(s) (1 nvdla, 1 cpu), 1 transition(s)"
    assert s["est_cycles_per_image"] > 0


def test_demo_text_report(capsys):
    assert main(["demo", "--limit", "2", "--calib-samples", "20", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for text in ("2 held-out images, preset nv_small", "fp32 CPU", "onnxruntime",
                 "int8 DLA nv_small cmodel", "bit-exact: yes", "subgraphs:",
                 "estimated DLA cycles per image",
                 "1 x Softmax: nvdla declined: op Softmax has no NVDLA lowering"):
        assert text in out, text


def test_demo_reports_a_mismatch_and_fails(monkeypatch, capsys):
    from tengine_host.devices import nvdla

    real = nvdla.run_reference

    def off_by_one(graph, plans, feeds):  # a reference that differs in one byte per tensor
        values = real(graph, plans, feeds)
        for name, v in values.items():
            if name not in feeds:
                v = v.copy()
                v.flat[0] = v.flat[0] + 1 if v.flat[0] < 127 else 126
                values[name] = v
        return values

    monkeypatch.setattr(nvdla, "run_reference", off_by_one)
    assert main(["demo", "--limit", "2", "--calib-samples", "20", "--json", "--no-progress"]) == 1
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["bit_exact"] is False
    assert all(c["bad_images"] == 2 and c["bad_bytes"] == 2 and c["max_abs_diff"] == 1
               for c in s["layers"])
    assert "differs from the int8 CPU reference in /0/features/features.1/Relu_output_0" \
        in cap.err


def test_demo_bad_options(capsys):
    with pytest.raises(SystemExit) as exc:       # argparse lists the presets
        main(["demo", "--preset", "nv_tiny", "--no-progress"])
    assert exc.value.code == 2
    assert "invalid choice: 'nv_tiny' (choose from 'nv_small', " in capsys.readouterr().err
    assert main(["demo", "--limit", "0", "--no-progress"]) == 2
    assert "--limit 0 must be in 1..360" in capsys.readouterr().err


def _report(mismatch: list[tuple[str, int, int, int]]):
    from tengine_host.verify import Checked, Mismatch, VerifyReport

    r = VerifyReport(samples=2, layers_checked=2)
    r.checked = {"a": Checked("a", "conv", "Conv", (1, 2, 2, 2)),
                 "b": Checked("b", "fc", "Gemm", (1, 3))}
    r.mismatches = [Mismatch(t, "n", "Op", 0, sample, n, 8, d) for t, sample, n, d in mismatch]
    return r


def test_tally_counts_images_and_bytes():
    checks: dict = {}
    report = _report([("a", 1, 3, 2), ("b", 1, 1, 5)])
    demo.tally(report, checks, 0)        # sample 0: clean
    demo.tally(report, checks, 1)        # sample 1: both tensors differ
    a, b = checks["a"], checks["b"]
    assert (a.images, a.bad_images, a.bad_bytes, a.total_bytes, a.max_abs_diff) == (2, 1, 3, 16, 2)
    assert (b.images, b.bad_images, b.bad_bytes, b.total_bytes, b.max_abs_diff) == (2, 1, 1, 6, 5)
    assert (a.node, a.op_type, a.shape) == ("conv", "Conv", (1, 2, 2, 2))
