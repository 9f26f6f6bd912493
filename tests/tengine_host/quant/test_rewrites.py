"""Weight rewrites carried in the calibration table: stored and read back, applied once
wherever the table is used, refused on another model, and chosen by the held-out check
where they help (a model built so that equalization must help)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from opendla.cli import main
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.quant.fidelity import calibrate_checked, weight_rewrites
from tengine_host.quant.rewrites import CHANNEL_GROUPS, KEY, GraphRewrites, apply, with_rewrites
from tengine_host.quant.table import QuantTable, load_table, save_table
from tests.tengine_host.passes.graphs import const, model, node

RNG = np.random.default_rng(5)
WIDTH = 8


def _conv(bias: bool = True):
    w = RNG.uniform(-1, 1, (3, 2, 1, 1))
    inits = [const("w", w)] + ([const("b", [0.5, -1.0, 2.0])] if bias else [])
    m = model([node("c", "Conv", ["x", "w", "b"] if bias else ["x", "w"], ["y"])], inits,
              [1, 2, 4, 4])
    return m, load_model(m)


def _lopsided_model():
    """conv -> ReLU -> conv whose middle tensor's channel k is scaled by 4**(k - 4) and the
    second conv undoes it: per-tensor int8 of that tensor loses the small channels, which
    carry as much of the output as the large ones, unless the scales are evened out."""
    spread = 4.0 ** (np.arange(WIDTH) - 4)
    rng = np.random.default_rng(8)
    w1 = rng.uniform(-1, 1, (WIDTH, 3, 3, 3)) * spread[:, None, None, None]
    w2 = rng.uniform(-1, 1, (4, WIDTH, 1, 1)) / spread[None, :, None, None]
    return model([node("c1", "Conv", ["x", "w1"], ["t"], pads=[1, 1, 1, 1]),
                  node("r", "Relu", ["t"], ["u"]), node("c2", "Conv", ["u", "w2"], ["y"])],
                 [const("w1", w1), const("w2", w2)], [1, 3, 8, 8])


def _lopsided():
    return load_model(_lopsided_model())


def _samples(n: int):
    return [{"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


def test_the_table_keeps_its_rewrites_through_json(tmp_path):
    table = QuantTable({"x": {"scale": 0.5, "min": -1.0, "max": 1.0}},
                       rewrites=GraphRewrites(True, {"c": (0.25, -1.0, 3.0)}))
    save_table(table, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc[KEY] == {"equalize": True, "bias_shift": {"c": [0.25, -1.0, 3.0]}}
    back = load_table(tmp_path / "t.json")
    assert back.rewrites == table.rewrites and dict(back) == dict(table)
    # channel groups' scales are written when there are some, and read back
    scaled = QuantTable(table, rewrites=GraphRewrites(True, {}, {"t": (0.5, 1.0)}))
    save_table(scaled, tmp_path / "s.json")
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc[KEY]["channel_scale"] == {"t": [0.5, 1.0]}
    assert doc[KEY]["channel_groups"] == CHANNEL_GROUPS
    assert load_table(tmp_path / "s.json").rewrites == scaled.rewrites
    # a table without rewrites is written as before: tensors only
    save_table(QuantTable(table), tmp_path / "plain.json")
    assert KEY not in json.loads((tmp_path / "plain.json").read_text())
    assert not load_table(tmp_path / "plain.json").rewrites


@pytest.mark.parametrize("bad, says", [
    ([1, 2], "must be an object"),
    ({"equalize": "yes"}, "equalize must be true or false, got 'yes'"),
    ({"equalize": True, "bias": {}}, "must be an object with 'equalize'"),
    ({"bias_shift": {"c": []}}, "bias_shift['c'] must be a non-empty list"),
    ({"bias_shift": {"c": [1.0, "a"]}}, "bias_shift['c'] must be a non-empty list"),
    ({"bias_shift": [1.0]}, "bias_shift must map layer names"),
    ({"channel_groups": 2, "channel_scale": {"t": [1.0, 0.0]}},
     "channel_scale['t'] must be a non-empty list of positive numbers"),
    ({"channel_groups": 2, "channel_scale": {"t": [1.0, -0.5]}},
     "channel_scale['t'] must be a non-empty list"),
    ({"channel_scale": [0.5]}, "channel_scale must map tensor names"),
    # scales of an older grouping (a stream was one group) would fall on other groups
    ({"channel_scale": {"t": [1.0]}}, "made for channel groups of kind 1, this OpenDLA "
                                      "finds groups of kind 2; re-run 'opendla quantize'"),
])
def test_bad_rewrites_are_refused_by_name(tmp_path, bad, says):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"x": {"scale": 1.0}, KEY: bad}))
    with pytest.raises(ValueError, match="t.json") as err:
        load_table(path)
    assert says in str(err.value)


@pytest.mark.parametrize("bias", [True, False])
def test_a_bias_shift_moves_the_output_by_it(bias):
    _, g = _conv(bias)
    shift = (0.5, -2.0, 0.125)
    x = {"x": RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)}
    got = interpret(apply(g, GraphRewrites(bias_shift={"c": shift})), x)["y"]
    want = interpret(g, x)["y"] - np.array(shift).reshape(1, 3, 1, 1)
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_rewrites_of_another_model_are_refused():
    _, g = _conv()
    with pytest.raises(ValueError, match="no layer 'other'"):
        apply(g, GraphRewrites(bias_shift={"other": (1.0, 2.0, 3.0)}))
    with pytest.raises(ValueError, match="'c' has 3 output channels, the shift 2"):
        apply(g, GraphRewrites(bias_shift={"c": (1.0, 2.0)}))


def test_rewrites_apply_once():
    _, g = _conv()
    table = QuantTable(rewrites=GraphRewrites(bias_shift={"c": (1.0, 1.0, 1.0)}))
    once = with_rewrites(g, table)
    assert once is not g and with_rewrites(once, table) is once
    assert with_rewrites(g, QuantTable()) is g
    with pytest.raises(ValueError, match="has bias correction applied, the calibration table "
                                         "wants cross-layer equalization"):
        with_rewrites(once, QuantTable(rewrites=GraphRewrites(equalize=True)))


def test_equalization_is_kept_where_it_helps_and_travels_with_the_table():
    g = _lopsided()
    table, report = calibrate_checked(g, _samples(12), progress=False,
                                      rewrites=weight_rewrites(bias_correction="off"))
    # equalization by the pair's weights, and by its data on top
    assert set(report.variants) == {"symmetric", "cross-layer equalization",
                                    "cross-layer equalization (pairs by data)"}
    assert report.applied.startswith("cross-layer equalization") and table.rewrites.equalize
    # the small channels are lost without it (by construction): a wide margin
    assert report.variants["cross-layer equalization"] > report.variants["symmetric"] + 10
    x = _samples(1)[0]
    equalized = apply(g, table.rewrites)
    np.testing.assert_allclose(interpret(equalized, x)["y"], interpret(g, x)["y"],
                               rtol=1e-4, atol=1e-5 * np.abs(interpret(g, x)["y"]).max())
    int8 = get_device("cpu", precision="int8")
    # the executor runs the loaded model with the table's rewrites ...
    with Executor(g, [int8], table) as ex, Executor(equalized, [int8], table) as ref:
        np.testing.assert_array_equal(ex.run(x)["y"], ref.run(x)["y"])
    # ... and the DLA computes them bit for bit as the int8 reference does
    with Executor(g, [get_device("nvdla"), get_device("cpu")], table) as dla, \
            Executor(g, [int8], table) as ref:
        assert [d.name for d, _ in dla.partition.parts] == ["nvdla"]
        np.testing.assert_array_equal(dla.run(x)["y"], ref.run(x)["y"])


def test_quantize_writes_the_rewrites_and_compile_and_run_use_them(tmp_path, capsys):
    import onnx

    onnx.save(_lopsided_model(), tmp_path / "m.onnx")
    np.savez(tmp_path / "cal.npz", x=np.concatenate([s["x"] for s in _samples(12)]))
    np.save(tmp_path / "x.npy", _samples(1)[0]["x"])
    assert main(["quantize", str(tmp_path / "m.onnx"), "-i", str(tmp_path / "cal.npz"),
                 "-o", str(tmp_path / "t.json"), "--no-progress"]) == 0
    kept = capsys.readouterr().out.split(" kept):")[0].split(": ")[-1]
    assert kept.startswith("cross-layer equalization"), kept
    assert json.loads((tmp_path / "t.json").read_text())[KEY]["equalize"] is True
    assert main(["compile", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "t.json"),
                 "-o", str(tmp_path / "out")]) == 0
    for device, opts in (("cpu", ["--precision", "int8"]), ("nvdla", [])):
        assert main(["run", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npy"),
                     "--device", device, *opts, "--calib", str(tmp_path / "t.json"),
                     "--save-outputs", str(tmp_path / device)]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "nvdla" / "y.npy"),
                                  np.load(tmp_path / "cpu" / "y.npy"))


def test_the_table_records_the_nodes_kept_in_fp32_and_commands_default_to_them(tmp_path,
                                                                                capsys):
    """quantize --keep-float c1 writes it into the table; run then keeps c1 on the CPU
    without being told (one DLA layer less), and --keep-float '' overrides the table."""
    import onnx

    onnx.save(_lopsided_model(), tmp_path / "m.onnx")
    np.savez(tmp_path / "cal.npz", x=np.concatenate([s["x"] for s in _samples(12)]))
    np.save(tmp_path / "x.npy", _samples(1)[0]["x"])
    table = tmp_path / "t.json"
    assert main(["quantize", str(tmp_path / "m.onnx"), "-i", str(tmp_path / "cal.npz"),
                 "-o", str(table), "--keep-float", "c1", "--no-progress"]) == 0
    assert load_table(table).keep_float == ("c1",)
    capsys.readouterr()

    def dla_mac_share(*extra):
        assert main(["run", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npy"),
                     "--device", "nvdla", "--calib", str(table), "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)["dla_mac_share"]

    # c1: 8 x 3 x 3 x 3 MACs at each of 8 x 8 outputs (13,824); c2: 4 x 8 at each (2,048)
    assert dla_mac_share() == pytest.approx(2048 / (13824 + 2048))
    assert dla_mac_share("--keep-float", "") == 1.0
    # a table naming a node the model does not have is refused, saying where it came from
    doc = json.loads(table.read_text())
    doc["__keep_float__"] = ["nope"]
    table.write_text(json.dumps(doc))
    assert main(["run", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npy"),
                 "--device", "nvdla", "--calib", str(table)]) == 2
    assert "calibration table's keep-float list" in capsys.readouterr().err
