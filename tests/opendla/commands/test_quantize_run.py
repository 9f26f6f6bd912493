"""``opendla quantize`` then ``opendla run`` on the demo model, through the CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_digits

from opendla.cli import main

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


def test_quantize_then_run_int8(tmp_path, capsys):
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    np.savez(tmp_path / "cal.npz", input=x[:100])
    np.save(tmp_path / "x.npy", x[-1:])
    calib = tmp_path / "cal.json"
    report = tmp_path / "report.json"
    assert main(["quantize", LENET, "-i", str(tmp_path / "cal.npz"), "-o", str(calib),
                 "--report", str(report)]) == 0
    cap = capsys.readouterr()
    # every fourth sample is held out: 75 calibrate, 25 check
    assert "over 75 of 100 samples" in cap.out and "25 held-out samples" in cap.out
    assert cap.err == ""            # no progress bar off a terminal, no fidelity warning
    table = json.loads(calib.read_text())
    calibrated = [i for i in range(100) if i % 4 != 3]
    assert table["input"]["max"] == float(x[calibrated].max()) and "probs" in table
    rep = json.loads(report.read_text())
    assert (rep["check"], rep["calibration_samples"], rep["checked_samples"]) == \
        ("held-out", 75, 25)
    (probs_fidelity,) = rep["outputs"]
    assert probs_fidelity["name"] == "probs" and probs_fidelity["top1_agreement"] >= 0.95

    rc = main(["run", LENET, "--input", f"input={tmp_path / 'x.npy'}", "--precision", "int8",
               "--calib", str(calib), "--save-outputs", str(tmp_path / "out"), "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    (probs,) = summary["outputs"]
    assert probs["shape"] == [1, 10] and len(probs["top_k"][0]) == 5
    saved = np.load(tmp_path / "out" / "probs.npy")
    assert probs["top_k"][0][0][0] == int(saved.argmax())
    assert probs["top_k"][0][0][0] == d.target[-1]  # the last digit, a held-out one


def test_run_errors_are_reported_not_raised(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", LENET, "--input", f"nope={tmp_path / 'x.npy'}"]) == 2
    assert "'nope' is not a model input (input)" in capsys.readouterr().err
    assert main(["run", LENET, "--input", str(tmp_path / "x.npy"), "--precision", "int8"]) == 2
    assert "needs --calib" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:   # argparse: choices listed in the message
        main(["run", LENET, "--input", str(tmp_path / "x.npy"), "--device", "tpu"])
    assert exc.value.code == 2
    assert "invalid choice: 'tpu' (choose from 'cpu', 'nvdla')" in capsys.readouterr().err


def test_quantize_image_folder_dims_default_to_the_model_input(tmp_path, capsys):
    from PIL import Image

    Image.fromarray(np.full((8, 8), 128, np.uint8), "L").save(tmp_path / "a.png")
    out = tmp_path / "c.json"
    for dims in ([], ["-g", "1,8,8"]):
        out.unlink(missing_ok=True)
        assert main(["quantize", LENET, "-i", str(tmp_path), "-o", str(out), *dims,
                     "-s", "0.0625", "--no-progress"]) == 0
        # one image of 128 * 1/16 = 8.0 everywhere
        assert json.loads(out.read_text())["input"]["min"] == 8.0
    assert main(["quantize", LENET, "-i", str(tmp_path), "-o", str(out), "-g", "1,9,9"]) == 2
    assert "does not match input 'input'" in capsys.readouterr().err


MNIST = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_mnist.onnx")


def _ort(model, x):
    import onnxruntime as ort

    sess = ort.InferenceSession(model)
    return np.concatenate([sess.run(None, {"input": x[i:i + 1]})[0] for i in range(len(x))])


def test_kl_table_and_batches_through_the_cli(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x = rng.random((12, 1, 28, 28), dtype=np.float32)
    np.savez(tmp_path / "cal.npz", input=x[:8])
    np.save(tmp_path / "x.npy", x[8:])
    calib = tmp_path / "cal.json"
    assert main(["quantize", MNIST, "-i", str(tmp_path / "cal.npz"), "-o", str(calib),
                 "-a", "1", "--no-progress"]) == 0
    assert "(kl)" in capsys.readouterr().out
    table = json.loads(calib.read_text())
    # the weight rewrites the held-out check kept (if any) beside the tensors' entries
    rewrites = table.pop("__graph_rewrites__", {"equalize": False, "bias_shift": {}})
    assert set(rewrites) == {"equalize", "bias_shift"}
    # zero points where the held-out check kept them (ReLU outputs, the input in [0, 1])
    assert all({"scale", "min", "max"} <= set(e) <= {"scale", "min", "max", "zero_point"}
               for e in table.values())
    # batch 4 on a dynamic-batch model, fp32 then int8
    assert main(["run", MNIST, "--input", str(tmp_path / "x.npy"),
                 "--save-outputs", str(tmp_path / "fp")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "fp" / "probs.npy"), _ort(MNIST, x[8:]),
                               atol=1e-5)
    assert main(["run", MNIST, "--input", str(tmp_path / "x.npy"), "--precision", "int8",
                 "--calib", str(calib), "--save-outputs", str(tmp_path / "q")]) == 0
    assert np.load(tmp_path / "q" / "probs.npy").shape == (4, 10)
    assert "  [3] top-5:" in capsys.readouterr().out


def test_batch_on_a_batch_one_model_runs_sample_by_sample(tmp_path):
    d = load_digits()
    x = (d.images[-5:] / 16.0).astype(np.float32)[:, None]
    np.save(tmp_path / "x.npy", x)
    assert main(["run", LENET, "--input", f"input={tmp_path / 'x.npy'}",
                 "--save-outputs", str(tmp_path / "o")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "o" / "probs.npy"), _ort(LENET, x), atol=1e-5)


def test_debug_flags(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", LENET, "--input", "x.npy", "--debug-graph", "--debug-time",
                 "--debug-data", "--debug-ref"]) == 0
    err = capsys.readouterr().err
    assert "graph 'main_graph'" in err and "total" in err and "TG_DEBUG_DATA" in err
    dumped = sorted(p.name for p in (tmp_path / "output").iterdir())
    assert dumped[0].startswith("0000_") and any(".out0.probs.npy" in n for n in dumped)


def test_run_bad_inputs_are_named(tmp_path, capsys):
    np.save(tmp_path / "wrong.npy", np.zeros((1, 1, 9, 9), np.float32))
    np.save(tmp_path / "ints.npy", np.zeros((1, 1, 8, 8), np.int64))
    np.save(tmp_path / "nhwc.npy", np.zeros((1, 8, 8, 1), np.float32))
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    cases = [
        (["--input", str(tmp_path / "wrong.npy")],
         "input 'input' has shape (1, 1, 9, 9), the model expects (1, 1, 8, 8) "
         "(the batch dimension may differ)\n"),
        (["--input", str(tmp_path / "nhwc.npy")],
         "it looks channels-last (NHWC): the model takes NCHW"),
        (["--input", str(tmp_path / "ints.npy")],
         "input 'input' has dtype int64, the model expects float32"),
        (["--input", str(tmp_path / "junk.npy")], "cannot read"),
        (["--input", str(tmp_path / "ints.npy"), "--input-shape", "input=1,x"],
         "--input-shape 'input=1,x' must be NAME=D0,D1,..."),
        (["--input", str(tmp_path / "ints.npy"), "--input-shape", "nope=1,1,8,8"],
         "--input-shape names nope, not a model input (input)"),
    ]
    for extra, message in cases:
        assert main(["run", LENET, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_table_of_another_model_is_rejected(tmp_path, capsys):
    (tmp_path / "digits.json").write_text(json.dumps(
        {"input": {"scale": 0.01}, "conv_out": {"min": -1.0, "max": 2.0}}))
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 28, 28), np.float32))
    assert main(["run", MNIST, "--input", str(tmp_path / "x.npy"), "--precision", "int8",
                 "--calib", str(tmp_path / "digits.json")]) == 2
    err = capsys.readouterr().err
    assert "does not match model" in err and "re-run 'opendla quantize'" in err
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["run", MNIST, "--input", str(tmp_path / "x.npy"), "--precision", "int8",
                 "--calib", str(tmp_path / "bad.json")]) == 2
    assert "cannot read calibration table" in capsys.readouterr().err


def test_quantize_bad_calibration_inputs(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "a.png").write_bytes(b"\x89PNG truncated")
    (tmp_path / "t.npz").write_bytes(b"PK\x03\x04 truncated")
    np.savez(tmp_path / "other.npz", image=np.zeros((2, 1, 8, 8), np.float32))
    out = str(tmp_path / "c.json")
    cases = [
        (["-i", str(empty), "-g", "1,8,8"], "no images"),
        (["-i", str(broken), "-g", "1,8,8"], "cannot read image"),
        (["-i", str(tmp_path / "t.npz")], "cannot read"),
        (["-i", str(tmp_path / "other.npz")], "missing model inputs ['input']"),
        (["-i", str(tmp_path / "nothing")], "does not exist"),
        (["-i", str(empty), "-g", "1,8,8", "-y", "4,4"], "-y 4,4 must match the image H,W = 8,8"),
    ]
    for extra, message in cases:
        assert main(["quantize", LENET, "-o", out, "--no-progress", *extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err
    import pytest

    with pytest.raises(SystemExit):
        main(["quantize", LENET, "-o", out, "-i", str(empty), "-a", "entropy"])
    assert "algorithm 'entropy' not in auto, minmax, kl, percentile" in capsys.readouterr().err


def test_run_on_the_dla_matches_the_int8_cpu_path_on_any_preset(tmp_path, capsys):
    """--device nvdla --preset P: the accelerator's outputs equal the CPU int8 golden's."""
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    np.savez(tmp_path / "cal.npz", input=x[:64])
    np.save(tmp_path / "x.npy", x[-3:])
    calib = str(tmp_path / "cal.json")
    assert main(["quantize", LENET, "-i", str(tmp_path / "cal.npz"), "-o", calib,
                 "--no-progress"]) == 0
    common = ["run", LENET, "--input", f"input={tmp_path / 'x.npy'}", "--calib", calib]
    assert main([*common, "--precision", "int8", "--save-outputs", str(tmp_path / "cpu")]) == 0
    for preset in ("nv_small", "nv_large"):
        assert main([*common, "--device", "nvdla", "--preset", preset,
                     "--save-outputs", str(tmp_path / preset)]) == 0
        np.testing.assert_allclose(np.load(tmp_path / preset / "probs.npy"),
                                   np.load(tmp_path / "cpu" / "probs.npy"), rtol=1e-5, atol=1e-7)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:   # argparse lists the presets
        main([*common, "--device", "nvdla", "--preset", "nv_tiny"])
    assert exc.value.code == 2
    assert "invalid choice: 'nv_tiny' (choose from 'nv_small'," in capsys.readouterr().err


def test_run_verify_checks_every_dla_tensor(tmp_path, capsys, monkeypatch):
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    np.savez(tmp_path / "cal.npz", input=x[:60])
    np.save(tmp_path / "x.npy", x[-3:])                  # a batch: verified sample by sample
    calib = tmp_path / "cal.json"
    assert main(["quantize", LENET, "-i", str(tmp_path / "cal.npz"), "-o", str(calib),
                 "--no-progress"]) == 0
    capsys.readouterr()
    args = ["run", LENET, "--device", "nvdla", "--calib", str(calib), "--input",
            str(tmp_path / "x.npy"), "--verify", "--json"]
    assert main(args) == 0
    s = json.loads(capsys.readouterr().out)
    # LeNet: 8 DLA layers (convs, pools, flatten, FCs) then the softmax on the CPU
    assert s["subgraphs"] == {"nvdla": 1, "cpu": 1} and s["dla_mac_share"] == 1.0
    assert (s["bit_exact"], s["layers_checked"], s["samples"], s["mismatches"]) == \
        (True, 8, 3, [])
    assert [o["shape"] for o in s["outputs"]] == [[3, 10]]

    # a reference that disagrees in one value of one tensor is reported, exit 1
    from tengine_host.devices import nvdla

    real = nvdla.run_reference

    def off(graph, plans, feeds):
        values = real(graph, plans, feeds)
        name = next(t for t in values if t not in feeds)
        values[name] = values[name].copy()
        values[name].flat[3] ^= 1
        return values

    monkeypatch.setattr(nvdla, "run_reference", off)
    assert main(args[:-1]) == 1
    out = capsys.readouterr().out
    assert "verify: MISMATCH - 1 of 8 DLA tensors differ (in 3 of 3 sample(s))" in out
    assert "1/384 differ, max |diff| 1" in out


def test_run_verify_needs_the_dla(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros((1, 1, 8, 8), np.float32))
    assert main(["run", LENET, "--input", str(tmp_path / "x.npy"), "--verify"]) == 2
    assert "--verify needs --device nvdla and --calib" in capsys.readouterr().err


def test_keep_float_through_compile_and_run(tmp_path, capsys):
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    np.savez(tmp_path / "cal.npz", input=x[:12])
    np.save(tmp_path / "x.npy", x[-1:])
    calib = str(tmp_path / "cal.json")
    assert main(["quantize", LENET, "-i", str(tmp_path / "cal.npz"), "-o", calib,
                 "--no-progress"]) == 0
    capsys.readouterr()
    middle = "/0/features/features.3/Conv"
    assert main(["compile", LENET, "--calib", calib, "-o", str(tmp_path / "out"),
                 "--keep-float", middle, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # the middle convolution on the CPU cuts the DLA's one subgraph in two
    assert len(list((tmp_path / "out").glob("*.nvdla"))) == 2, summary
    assert main(["run", LENET, "--device", "nvdla", "--calib", calib, "--input",
                 str(tmp_path / "x.npy"), "--keep-float", middle, "--verify"]) == 0
    capsys.readouterr()
    assert main(["run", LENET, "--device", "nvdla", "--calib", calib, "--input",
                 str(tmp_path / "x.npy"), "--keep-float", "/0/features/features.3/Cnv"]) == 2
    err = capsys.readouterr().err
    assert "neither a node nor a tensor" in err and "'/0/features/features.3/Conv'" in err


def test_quantize_keeps_a_regression_head_in_fp32_and_says_so(tmp_path, capsys):
    """The default measures the output layers in fp32 and keeps them where an output
    gains (:func:`tengine_host.quant.fidelity.output_writers`); ``--float-outputs off``
    does not try."""
    import onnx

    from tests.tengine_host.quant.test_coarse_outputs import _backbone_and_head

    path = tmp_path / "head.onnx"
    onnx.save(_backbone_and_head(), path)
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "cal.npz", x=rng.standard_normal((8, 1, 4, 16, 16)).astype(np.float32))
    report = tmp_path / "report.json"
    assert main(["quantize", str(path), "-i", str(tmp_path / "cal.npz"), "-o",
                 str(tmp_path / "t.json"), "--report", str(report), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "kept in fp32 on the CPU as measured (1 node): head" in out
    assert "+ fp32 outputs kept" in out
    doc = json.loads(report.read_text())
    assert doc["keep_float"] == ["head"] and doc["applied"].endswith("fp32 outputs")
    assert json.loads((tmp_path / "t.json").read_text())["__keep_float__"] == ["head"]
    assert main(["quantize", str(path), "-i", str(tmp_path / "cal.npz"), "-o",
                 str(tmp_path / "t.json"), "--float-outputs", "off", "--no-progress"]) == 0
    assert "kept in fp32" not in capsys.readouterr().out
    assert "__keep_float__" not in json.loads((tmp_path / "t.json").read_text())
