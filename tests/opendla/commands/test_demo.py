"""``opendla demo``: the LeNet digits demo end to end on the cmodel, and its checker.

Expected values come from outside the demo: labels from scikit-learn,
predictions from onnxruntime run here, layer output sizes from the model's
architecture (scripts/train_lenet_digits.py), and hand-computed int8 sums.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import onnxruntime as ort
from sklearn.datasets import load_digits

from opendla.cli import main
from opendla.commands import demo

# LeNet-5 for 8x8 digits: conv 5x5 pad 2 -> 6x8x8, pool, conv 3x3 pad 1 -> 16x4x4, pool,
# FC 64->120->84->10.  Output bytes each DLA layer writes per image:
LAYER_OUT = {"Conv": [6 * 8 * 8, 16 * 4 * 4], "Gemm": [120, 84, 10]}


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

    # Every Conv/Gemm ran on the DLA and was checked on every image, byte for byte.
    ops = [c["op_type"] for c in s["layers"]]
    assert ops == ["Conv", "Conv", "Gemm", "Gemm", "Gemm"]
    for op, sizes in LAYER_OUT.items():
        got = [c["total_bytes"] for c in s["layers"] if c["op_type"] == op]
        assert got == [8 * n for n in sizes]
    assert all(c["images"] == 8 and c["bad_bytes"] == 0 and c["bad_inputs"] == 0
               for c in s["layers"])
    assert s["bit_exact"] is True
    # Softmax has no DLA lowering: at least one CPU subgraph follows the DLA.
    assert s["subgraphs"] >= 2 and 1 <= s["dla_subgraphs"] < s["subgraphs"]
    assert s["partition"][0] == f"{s['subgraphs']} subgraph(s)"
    assert s["est_cycles_per_image"] > 0


def test_demo_text_report(capsys):
    assert main(["demo", "--limit", "2", "--calib-samples", "20", "--no-progress"]) == 0
    out = capsys.readouterr().out
    for text in ("2 held-out images, preset nv_small", "fp32 CPU", "onnxruntime",
                 "int8 DLA nv_small cmodel", "bit-exact: yes", "subgraphs:",
                 "estimated DLA cycles per image", "fallback: /1/Softmax (Softmax) -> cpu"):
        assert text in out, text


def test_demo_reports_a_mismatch_and_fails(monkeypatch, capsys):
    real = demo.reference_output

    def off_by_one(cap):  # a reference that disagrees with the DLA in one byte per layer
        ref = real(cap).copy()
        ref.flat[0] = ref.flat[0] + 1 if ref.flat[0] < 127 else 126
        return ref

    monkeypatch.setattr(demo, "reference_output", off_by_one)
    assert main(["demo", "--limit", "2", "--calib-samples", "20", "--json", "--no-progress"]) == 1
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["bit_exact"] is False
    assert all(c["bad_images"] == 2 and c["bad_bytes"] == 2 and c["max_abs_diff"] == 1
               for c in s["layers"])
    assert "differs from the int8 CPU reference in /0/features/features.0/Conv" in cap.err


def test_demo_bad_options(capsys):
    assert main(["demo", "--preset", "nv_tiny", "--no-progress"]) == 2
    assert "preset 'nv_tiny' not in nv_small, " in capsys.readouterr().err
    assert main(["demo", "--limit", "0", "--no-progress"]) == 2
    assert "--limit 0 must be in 1..360" in capsys.readouterr().err


def _fc_capture(x, y):
    """A 1-kernel FC layer, w = [3, -4], with unit multiplier and no shifts."""
    quant = SimpleNamespace(
        weight=np.array([[[[3]], [[-4]]]], np.int8),
        reference_kwargs=lambda: dict(clip_truncate=0, bias=np.array([5], np.int16),
                                      bias_shift=1, mul=np.array([1], np.int16), mul_shift=0,
                                      relu=False, cvt_offset=0, cvt_scale=1, cvt_shift=0))
    layer = SimpleNamespace(op_type="Gemm", quant=quant, out_hw=(1, 1), macs=2, pad_value=0,
                            geometry=dict(c=2, h=1, w=1, k=1, r=1, s=1, group=1, stride=(1, 1),
                                          dilation=(1, 1), pad_top=0, pad_left=0,
                                          pad_bottom=0, pad_right=0))
    return SimpleNamespace(name="fc", x_q=np.array(x, np.int8), y_q=np.array(y, np.int8),
                           layer=layer)


def test_check_captures_counts_bytes():
    # 10*3 + 2*(-4) + (5 << 1) = 32; an FC capture may come as [1, C] or [1, C, 1, 1].
    checks: dict = {}
    demo.check_captures([_fc_capture([[10, 2]], [[[[32]]]]),
                         _fc_capture([[[[10]], [[2]]]], [[30]])], checks)
    c = checks["fc"]
    assert (c.images, c.bad_images, c.bad_bytes, c.total_bytes, c.max_abs_diff) == (2, 1, 1, 2, 2)
    assert (c.shape_in, c.shape_out, c.macs) == ((2, 1, 1), (1, 1, 1), 2)
    assert c.bad_inputs == 0  # no chain inputs given: not checked


def test_check_captures_compares_inputs_with_the_chain():
    checks: dict = {}
    chain_x = np.array([[[[10]], [[2]]]], np.int8)
    demo.check_captures([_fc_capture([[10, 2]], [[32]])], checks, {"fc": chain_x})
    demo.check_captures([_fc_capture([[10, 3]], [[28]])], checks, {"fc": chain_x})
    demo.check_captures([_fc_capture([[10, 2]], [[32]])], checks, {})  # layer not in the chain
    c = checks["fc"]
    assert (c.images, c.bad_images, c.bad_inputs) == (3, 0, 2)
