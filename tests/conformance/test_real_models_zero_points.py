"""Real models from ../shared/models with zero points, on the DLA (nv_small).

The calibrated symmetric table goes through :func:`assign_zero_points`; every DLA
tensor must still equal the int8 CPU reference byte for byte, and the result must
track fp32:

* ppocr_mobile_v2_cls (MobileNetV3-small: ReLU, squeeze-excite gates, HardSwish):
  on held-out photos, the int8 reference with zero points tracks fp32 better than
  symmetric, layer by layer (median gain of the tensors it changes);
* ch_PP-OCRv4_det_320 (ConvTranspose, nearest Resize, Concat, gates): the text map
  (probability > 0.3) overlaps fp32's with IoU >= 0.9 on its sample page, as
  with symmetric tables (test_real_models_dla).
"""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.quant import assign_zero_points, calibrate
from tengine_host.verify import verify_run
from tests.conftest import shared_path

pytestmark = pytest.mark.conformance
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (dev extras) is needed "
                                                          "for the calibration photos")


def _photo(img: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """A photo as a [-1, 1] NCHW tensor (PaddleOCR's mean = std = 0.5)."""
    from PIL import Image

    img = np.asarray(img)
    if img.ndim == 2:
        img = np.stack([img] * 3, -1)
    x = np.asarray(Image.fromarray(img[..., :3]).resize((hw[1], hw[0]), Image.BILINEAR),
                   np.float32) / 255.0
    return ((x - 0.5) / 0.5).transpose(2, 0, 1)[None]


def _sqnr(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return 10 * np.log10(float((want ** 2).sum()) / max(float(((got - want) ** 2).sum()), 1e-30))


def test_ppocr_classifier_with_zero_points():
    d = skimage_data
    graph = load_model(shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx"),
                       input_shapes={"x": (1, 3, 48, 192)})
    calib = [{"x": _photo(i, (48, 192))} for i in (d.astronaut(), d.chelsea(), d.coffee(),
                                                   d.rocket())]
    held = [{"x": _photo(i, (48, 192))} for i in (d.text(), d.camera(), d.cat())]
    sym = calibrate(graph, calib, progress=False)
    zp = assign_zero_points(graph, sym)
    assert sum(1 for e in zp.values() if e.get("zero_point")) >= 20

    dla = get_device("nvdla", capture=True)
    with Executor(graph, [dla, get_device("cpu")], zp) as ex:
        _, _, report = verify_run(ex, held[0])
        assert [f.op_type for f in ex.partition.fallbacks] == ["Softmax"]
    assert report.bit_exact, report.summary()

    # layer by layer on the int8 reference: the tensors the zero points change
    gains = []
    fp32 = [interpret(graph, f, keep_all=True) for f in held]
    runs = {}
    for label, table in (("sym", sym), ("zp", zp)):
        prepared = get_device("cpu", precision="int8").prerun(graph, table)
        runs[label] = [interpret(graph, f, overrides=prepared.overrides, keep_all=True)
                       for f in held]
    for t in zp:
        if zp[t] == sym[t] or t not in fp32[0]:
            continue
        want = np.concatenate([f[t].ravel() for f in fp32])
        s = {k: _sqnr(np.concatenate([r[t].ravel() for r in v]), want) for k, v in runs.items()}
        gains.append(s["zp"] - s["sym"])
    # measured: median +2.2 dB over 26 tensors (-2.8 .. +21 dB)
    assert len(gains) >= 20 and float(np.median(gains)) >= 1.0, sorted(gains)


def test_ppocr_detector_text_map_with_zero_points():
    d = skimage_data
    graph = load_model(shared_path("models", "ch_PP-OCRv4_det_320.onnx"))
    sample = dict(np.load(shared_path("models", "ch_PP-OCRv4_det_320_sample.npz")))
    calib = [{"x": _photo(i, (320, 320))} for i in (d.text(), d.page())] + [sample]
    table = assign_zero_points(graph, calibrate(graph, calib, progress=False))
    assert sum(1 for e in table.values() if e.get("zero_point")) >= 20
    (out,) = graph.outputs
    want = interpret(graph, sample)[out] > 0.3
    dla = get_device("nvdla", capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        got, _, report = verify_run(ex, sample)
        assert ex.partition.subgraph_counts()["nvdla"] == 1
    assert report.bit_exact, report.summary()
    got = got[out] > 0.3
    iou = (got & want).sum() / (got | want).sum()
    assert want.mean() > 0.1 and iou >= 0.9, f"text map IoU {iou:.3f}"
