"""Real trained models from ../shared/models on the DLA, calibrated on real photos.

* face_landmark_192 (MediaPipe): one DLA subgraph with all of its MACs; the
  468 landmarks stay within a few input pixels of fp32's;
* ppocr_mobile_v2_cls (MobileNetV3-small): one DLA subgraph, the Softmax on the CPU;
* ch_PP-OCRv4_det_320 (DB text detector), on nv_small and nv_large: every op on the
  DLA, its final Sigmoid by a lookup table (nv_large's SDP, nv_small's CDP), and its
  text map (probability > 0.3) overlaps fp32's with IoU >= 0.9 on its sample page;
* yolov8n_nudenet_320 on nv_small and nv_large: every SiLU on the DLA (nv_small:
  the CDP's table), its C2f splits of 16 + 16 channels too (inside one of
  nv_large's 32-channel atoms), backbone and heads one DLA subgraph; the box
  decoding (the distribution's Softmax and its 16 -> 1 expectation) is the CPU
  tail.

The first two run on nv_small.

Every DLA tensor is verified against the int8 CPU reference.  Calibration
photos come from scikit-image's bundled sample images.
"""

from __future__ import annotations

import numpy as np
import pytest

from tengine_host.zoo.report import evaluate
from tests.conftest import shared_path

pytestmark = pytest.mark.conformance
skimage_data = pytest.importorskip("skimage.data", reason="scikit-image (dev extras) is needed "
                                                          "for the calibration photos")


def _photo(img: np.ndarray, hw: tuple[int, int], signed: bool) -> np.ndarray:
    from PIL import Image

    img = np.asarray(img)
    if img.ndim == 2:
        img = np.stack([img] * 3, -1)
    x = np.asarray(Image.fromarray(img[..., :3]).resize((hw[1], hw[0]), Image.BILINEAR),
                   np.float32) / 255.0
    x = (x - 0.5) / 0.5 if signed else x
    return x.transpose(2, 0, 1)[None]


def _photos(name: str, hw: tuple[int, int], signed: bool) -> list[dict]:
    d = skimage_data
    imgs = [d.astronaut()[0:220, 140:330], d.chelsea(), d.coffee(), d.text(), d.page(),
            d.camera()]
    return [{name: _photo(i, hw, signed)} for i in imgs]


def test_face_landmark_whole_on_the_dla():
    path = shared_path("models", "face_landmark_192.onnx")
    sample = dict(np.load(shared_path("models", "face_landmark_192_sample.npz")))
    row = evaluate(path, "nv_small", calibration=_photos("input_1", (192, 192), False) + [sample],
                   sample=sample)
    assert (row.dla_subgraphs, row.subgraphs) == (1, 1) and row.dla_mac_share >= 0.99
    assert row.bit_exact and row.cosine >= 0.999


def test_ppocr_classifier_whole_on_the_dla():
    path = shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx")
    calib = _photos("x", (48, 192), True)
    row = evaluate(path, "nv_small", calibration=calib[:-1], sample=calib[-1],
                   input_shapes={"x": (1, 3, 48, 192)})
    assert (row.dla_subgraphs, row.subgraphs) == (1, 2), row.fallbacks
    assert [op for _, op, _ in row.fallbacks] == ["Softmax"]
    assert row.bit_exact


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_ppocr_detector_text_map_on_the_dla(preset):
    from tengine_host.devices import get_device
    from tengine_host.executor import Executor
    from tengine_host.interpreter import interpret
    from tengine_host.model import load_model
    from tengine_host.quant import calibrate
    from tengine_host.verify import verify_run

    graph = load_model(shared_path("models", "ch_PP-OCRv4_det_320.onnx"))
    sample = dict(np.load(shared_path("models", "ch_PP-OCRv4_det_320_sample.npz")))
    # calibrated on two scanned pages and four photos; the sample page is held out
    table = calibrate(graph, _photos("x", (320, 320), True), progress=False)
    (out,) = graph.outputs
    want = interpret(graph, sample)[out] > 0.3
    dla = get_device("nvdla", preset=preset, capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        got, _, report = verify_run(ex, sample)
        ops, macs = ex.partition.share("nvdla")
        dla_parts = ex.partition.subgraph_counts()["nvdla"]
    # every op, the final Sigmoid too: by the SDP's lookup table on nv_large, by the
    # CDP's on nv_small
    assert report.bit_exact and macs == 1.0 and ops == 1.0 and dla_parts == 1, \
        ex.partition.fallbacks
    got = got[out] > 0.3
    iou = (got & want).sum() / (got | want).sum()
    assert want.mean() > 0.1 and iou >= 0.9, f"text map IoU {iou:.3f}"


@pytest.mark.parametrize("preset", ["nv_small", "nv_large"])
def test_yolov8n_is_one_dla_subgraph_and_its_decoding_tail(preset):
    from tengine_host.model import load_model
    from tengine_host.quant.fidelity import dla_partition

    graph = load_model(shared_path("models", "yolov8n_nudenet_320.onnx"),
                       input_shapes={"images": (1, 3, 320, 320)})
    part = dla_partition(graph, preset)
    assert [dev.name for dev, _ in part.parts] == ["nvdla", "cpu"], part.report()
    cpu_ops = {n.op_type for n in part.parts[1][1].nodes}
    # the tail: reshapes of the head outputs, the box distribution's Softmax and
    # expectation, the class Sigmoid, the box arithmetic
    assert cpu_ops <= {"Reshape", "Concat", "Transpose", "Softmax", "Conv", "Sigmoid", "Slice",
                       "Sub", "Add", "Div", "Mul"}, cpu_ops
    (conv,) = [n for n in part.parts[1][1].nodes if n.op_type == "Conv"]
    assert graph.tensors[conv.inputs[1]].shape == (1, 16, 1, 1)   # the DFL's expectation
