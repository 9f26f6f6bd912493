"""``opendla compile`` on the LeNet demo model: loadables written, readable, inspectable."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from sklearn.datasets import load_digits

from accel.loadable.containers import op_name
from accel.loadable.descriptors import OP_CONV
from accel.loadable.io import read_loadable
from opendla.cli import main
from opendla.commands.inspect import describe
from tengine_host.model import load_model
from tengine_host.quant import calibrate, save_table

LENET = str(Path(__file__).resolve().parents[3] / "tengine_host" / "models" / "lenet5_digits.onnx")


@pytest.fixture(scope="module")
def calib(tmp_path_factory) -> Path:
    x = (load_digits().images[:16] / 16.0).astype(np.float32)[:, None]
    table = calibrate(load_model(LENET), [{"input": s[None]} for s in x], progress=False)
    path = tmp_path_factory.mktemp("calib") / "lenet.json"
    save_table(table, path)
    return path


def _conv_ops(path: str) -> int:
    d = describe(read_loadable(Path(path).read_bytes()))
    return sum(op["type"] == op_name(OP_CONV) for t in d["tasks"] for op in t["dla"]["ops"])


def test_compile_lenet_writes_loadables_that_parse_and_inspect(tmp_path, calib, capsys):
    out = tmp_path / "out"
    assert main(["compile", LENET, "--calib", str(calib), "-o", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["preset"] == "nv_small"
    loadables = summary["loadables"]
    assert loadables, "no DLA subgraph was compiled"
    written = sorted(p.name for p in out.iterdir())
    assert written == sorted(f"lenet5_digits_{r['subgraph']}.nvdla" for r in loadables)
    # the partition report lists each compiled subgraph on the nvdla device
    for r in loadables:
        assert any(line.strip().startswith(f"[{r['subgraph']}] nvdla")
                   for line in summary["partition"])
        assert Path(r["path"]).stat().st_size == r["bytes"]

    # every Conv / Gemm of the ONNX file runs on the DLA (all fit nv_small) as one
    # CONV op and each max pool as one PDP op (the flatten costs nothing)
    proto = onnx.load(LENET)
    convs = sum(n.op_type in ("Conv", "Gemm") for n in proto.graph.node)
    pools = sum(n.op_type == "MaxPool" for n in proto.graph.node)
    assert (convs, pools, len(loadables)) == (5, 2, 1)
    assert sum(_conv_ops(r["path"]) for r in loadables) == convs
    assert [row["engine"] for row in loadables[0]["layers"]] == [
        "CONV", "PDP", "CONV", "PDP", "CONV", "CONV", "CONV"]
    dram = loadables[0]["dram"]
    assert dram["inputs"] == 8 * 8 * 8 and dram["outputs"] == 16   # 1x8x8 / 10 channels, atoms
    assert dram["weights"] > 0 and dram["activations"] > 0

    # the first conv reads the 1x1x8x8 model input: some loadable has that tensor
    first = read_loadable(Path(loadables[0]["path"]).read_bytes())
    assert any((t.n, t.c, t.h, t.w) == (1, 1, 8, 8) for t in first.tensor_desc_list)

    for r in loadables:
        assert main(["inspect", r["path"]]) == 0
        text = capsys.readouterr().out
        assert text.startswith(f"{r['path']}: loadable")
        assert text.count(" CONV:") == _conv_ops(r["path"])


def test_compile_text_output_summarizes_each_loadable(tmp_path, calib, capsys):
    """A few lines per loadable (operations by engine, DLA memory, estimated cycles); -v
    adds the operation table.  The engine counts follow the ONNX file (5 Conv/Gemm on
    CONV, 2 MaxPool on PDP) and the estimate is the cmodel's op statistics of a run."""
    from accel.backends.session import LoadableSession
    from accel.config import get_preset

    assert main(["compile", LENET, "--calib", str(calib), "-o", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "subgraph(s)" in text and "per device:" in text
    (path,) = sorted(tmp_path.glob("*.nvdla"))
    assert f"-> {path} (" in text
    assert "    7 operations: 5 CONV, 2 PDP" in text
    assert "/0/features/features.0/Conv" not in text      # no per-operation rows
    assert len(text.splitlines()) < 20
    sess = LoadableSession(path.read_bytes(), get_preset("nv_small"))
    sess.run({"input": np.zeros((1, 1, 8, 8), np.int8)})
    assert f"    estimated {sess.cycles:,} cycles per sample" in text

    assert main(["compile", LENET, "--calib", str(calib), "-o", str(tmp_path), "-v"]) == 0
    verbose = capsys.readouterr().out
    # one table row per Conv/Gemm layer, named after its node
    for node in ("/0/features/features.0/Conv", "/0/classifier/classifier.5/Gemm"):
        assert node in verbose


def test_missing_calibration_entries_are_named(tmp_path, calib, capsys):
    table = json.loads(calib.read_text())
    gone = "/0/features/features.4/Relu_output_0"    # second conv's output
    del table[gone]
    bad = tmp_path / "partial.json"
    bad.write_text(json.dumps(table))
    assert main(["compile", LENET, "--calib", str(bad), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "has no entry for tensor(s) the DLA needs" in err and gone in err
    assert not (tmp_path / "o").exists()   # nothing half-written


def test_unknown_preset_lists_the_names(tmp_path, calib, capsys):
    with pytest.raises(SystemExit) as exc:       # argparse: the choices are listed
        main(["compile", LENET, "--calib", str(calib), "--preset", "nv_tiny",
              "-o", str(tmp_path)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'nv_tiny'" in err and "nv_small" in err and "nv_large" in err


def test_input_shape_errors(tmp_path, calib, capsys):
    assert main(["compile", LENET, "--calib", str(calib), "--input-shape", "input=1,x"]) == 2
    assert "--input-shape 'input=1,x' must be NAME=D0,D1,..." in capsys.readouterr().err
    assert main(["compile", LENET, "--calib", str(calib), "-o", str(tmp_path),
                 "--input-shape", "image=1,1,8,8"]) == 2
    err = capsys.readouterr().err
    assert "['image'], which are not model inputs; inputs: input" in err


def test_missing_calib_file(tmp_path, capsys):
    assert main(["compile", LENET, "--calib", str(tmp_path / "nope.json")]) == 2
    assert "cannot read calibration table" in capsys.readouterr().err


@pytest.mark.parametrize("preset, writes", [
    # the firmware's load (accel/runtime/fw_lut.py): S_LUT_ACCESS_CFG and 65 LE entries,
    # S_LUT_ACCESS_CFG and 257 LO entries, S_LUT_CFG, S_LUT_INFO, the two tables' start
    # and end (CDP: a LOW and a HIGH register each, SDP: one), two slope scales and two
    # slope shifts
    ("nv_small", 2 + 65 + 257 + 2 + 4 * 2 + 4),      # the CDP's table
    ("nv_large", 2 + 65 + 257 + 2 + 4 * 1 + 4),      # the SDP's Y stage
])
def test_compile_counts_the_lookup_table_loads(preset, writes, tmp_path, capsys):
    """Two SiLUs: two tables loaded, each before its operation (one LUT per unit)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(2):
        inits.append(numpy_helper.from_array(
            rng.normal(0, 0.3, (8, 8, 3, 3)).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Sigmoid", [f"c{i}"], [f"s{i}"]),
                  helper.make_node("Mul", [f"c{i}", f"s{i}"], [f"y{i}"])]
        x = f"y{i}"
    graph = helper.make_graph(nodes, "silus", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 8, 6, 6])], [helper.make_tensor_value_info(
            x, TensorProto.FLOAT, [1, 8, 6, 6])], inits)
    model = tmp_path / "silus.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
    table = calibrate(load_model(model), [{"x": rng.normal(size=(1, 8, 6, 6)).astype(
        np.float32)} for _ in range(2)], progress=False)
    save_table(table, tmp_path / "t.json")
    assert main(["compile", str(model), "--calib", str(tmp_path / "t.json"), "--preset",
                 preset, "-o", str(tmp_path / "out")]) == 0
    text = capsys.readouterr().out
    assert f"    2 lookup-table loads before their operations: {2 * writes:,} register " \
           f"writes" in text, text
