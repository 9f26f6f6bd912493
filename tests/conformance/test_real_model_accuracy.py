"""Int8 accuracy of real models with the default quantization, on held-out real images.

The numbers are the goals the project holds its default to (issue 44), checked with
``benchmarks/accuracy.py`` on the models that meet them today: the text-orientation
classifier keeps fp32's top-1 on >= 95 % of 92 held-out text lines, the face landmarks
stay within 1 px of fp32's on average over 51 held-out faces (none clipped), the text detector's
line boxes keep precision and recall >= 0.95 against fp32's on 16 held-out pages.
YOLOv8n's boxes are not here: they meet the goal only at times (P 0.90-0.97 on 18
held-out photos, one or two boxes near the threshold come and go with the float
summation order), and a test that passes either way checks nothing.
Calibration and test images are disjoint (:mod:`benchmarks.accuracy_images`).  The
full table, onnxruntime's quantization beside it, is the README's.
"""

from __future__ import annotations

import pytest

from tests.conftest import shared_path

pytestmark = pytest.mark.conformance
pytest.importorskip("skimage.data", reason="scikit-image (dev extras) makes the images")


def _default(name: str, tmp_path) -> dict[str, float]:
    shared_path("models", f"{name}.onnx")            # skips with a reason without ../shared
    from benchmarks.accuracy import run_model
    from benchmarks.accuracy_models import MODELS

    model = MODELS[name]
    (result,) = run_model(model, ["default"], calib=8, test=None, tmp=tmp_path,
                          progress=False).methods
    return result.metrics


def test_classifier_keeps_fp32_top1(tmp_path):
    assert _default("ppocr_mobile_v2_cls_48x192", tmp_path)["top1"] >= 0.95


def test_face_landmarks_within_a_pixel(tmp_path):
    metrics = _default("face_landmark_192", tmp_path)
    # and none clipped: int8 landmark outputs saturated past the calibration faces' range
    # put one landmark 30 px off; quantize keeps the output layers in fp32
    assert metrics["mean_px"] <= 1.0 and metrics["max_px"] <= 10.0, metrics


def test_text_detector_boxes(tmp_path):
    metrics = _default("ch_PP-OCRv4_det_320", tmp_path)
    assert metrics["precision"] >= 0.95 and metrics["recall"] >= 0.95, metrics
