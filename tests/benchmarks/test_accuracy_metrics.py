"""The accuracy benchmark's metrics and decoders on hand-computed cases, and one small run.

Expected values are worked out by hand in the comments (areas, softmax
expectations, sums of squares), not taken from the functions under test.
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from benchmarks.accuracy_decode import (
    db_text_boxes,
    decode_blazeface,
    decode_picodet,
    decode_yolov8,
    picodet_stride,
    ssd_anchor_centers,
)
from benchmarks.accuracy_metrics import (
    Detections,
    box_iou,
    mask_iou,
    match_detections,
    nms,
    point_errors,
    precision_recall,
    sqnr_db,
    weighted_nms,
)
from benchmarks.accuracy_models import MODELS
from tests.conftest import shared_path


def dets(boxes, scores, labels=None) -> Detections:
    boxes = np.array(boxes, np.float64).reshape(-1, 4)
    labels = np.zeros(len(boxes), np.int64) if labels is None else np.array(labels)
    return Detections(boxes, np.array(scores, np.float64), labels)


# ---- boxes -----------------------------------------------------------------------------

def test_iou_of_two_overlapping_squares():
    # 2x2 squares shifted by (1, 1): intersection 1, union 4 + 4 - 1 = 7
    assert box_iou([[0, 0, 2, 2]], [[1, 1, 3, 3]])[0, 0] == pytest.approx(1 / 7)


def test_iou_matrix_of_identical_disjoint_and_empty_boxes():
    a = [[0, 0, 10, 10], [0, 0, 0, 5]]                 # the second has no area
    b = [[0, 0, 10, 10], [20, 20, 30, 30], [0, 0, 10, 5]]
    # the first box: itself 1, a far box 0, its lower half 50/100
    np.testing.assert_allclose(box_iou(a, b), [[1, 0, 0.5], [0, 0, 0]])


def test_nms_drops_the_overlapping_lower_score():
    boxes = [[0, 0, 10, 10],        # 0.9
             [1, 1, 11, 11],        # 0.8, IoU with the first 81 / 119 = 0.68
             [20, 20, 30, 30],      # 0.7, overlaps nothing
             [21, 21, 31, 31]]      # 0.95, IoU with the third 0.68
    scores = [0.9, 0.8, 0.7, 0.95]
    assert nms(boxes, scores, 0.5).tolist() == [3, 0]
    assert nms(boxes, scores, 0.7).tolist() == [3, 0, 1, 2]
    assert nms(boxes, scores, 0.5, max_keep=1).tolist() == [3]


def test_nms_keeps_a_box_whose_iou_equals_the_threshold():
    # [0,0,2,1] is half of [0,0,2,2]: IoU exactly 0.5, suppressed only above 0.5
    assert nms([[0, 0, 2, 2], [0, 0, 2, 1]], [0.9, 0.8], 0.5).tolist() == [0, 1]
    assert nms([[0, 0, 2, 2], [0, 0, 2, 1]], [0.9, 0.8], 0.49).tolist() == [0]


def test_weighted_nms_averages_a_cluster_by_score():
    boxes = [[0, 0, 10, 10], [2, 0, 12, 10], [50, 50, 60, 60]]
    # the first two overlap by 80 / 120 = 0.67 > 0.3: 0.75 * [0,0,10,10] + 0.25 * [2,0,12,10]
    out, scores = weighted_nms(boxes, [0.75, 0.25, 0.6], 0.3)
    np.testing.assert_allclose(out, [[0.5, 0, 10.5, 10], [50, 50, 60, 60]])
    np.testing.assert_allclose(scores, [0.75, 0.6])


# ---- matching, precision and recall -------------------------------------------------------

def test_matching_counts_true_and_false_positives_and_misses():
    ref = dets([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], [0.9, 0.9, 0.9],
               labels=[0, 0, 1])
    got = dets([[1, 1, 11, 11],      # the first ref box (IoU 0.68), same class: hit
                [0, 0, 10, 10],      # the same ref box again, lower score: already taken
                [40, 40, 50, 50],    # the third ref box, but labelled class 0: no match
                [80, 80, 90, 90]],   # nothing there
               [0.8, 0.7, 0.9, 0.6], labels=[0, 0, 0, 0])
    assert match_detections(got, ref) == (1, 3, 2)
    precision, recall = precision_recall(1, 3, 2)
    assert (precision, recall) == (0.25, 1 / 3)


def test_matching_gives_the_reference_box_to_the_better_score():
    ref = dets([[0, 0, 10, 10]], [0.9])
    got = dets([[0, 0, 10, 6], [0, 0, 10, 10]], [0.5, 0.8])   # IoU 0.6 and 1, both enough
    assert match_detections(got, ref) == (1, 1, 0)
    assert match_detections(got, ref, iou_threshold=0.7) == (1, 1, 0)
    assert match_detections(dets([[0, 0, 10, 6]], [0.5]), ref, iou_threshold=0.7) == (0, 1, 1)


def test_precision_and_recall_of_empty_answers_are_undefined():
    precision, recall = precision_recall(0, 0, 3)       # found nothing, missed 3
    assert math.isnan(precision) and recall == 0
    precision, recall = precision_recall(0, 2, 0)       # nothing to find, 2 false alarms
    assert precision == 0 and math.isnan(recall)
    assert match_detections(dets([], []), dets([], [])) == (0, 0, 0)


def test_detections_reject_mismatched_lengths():
    with pytest.raises(ValueError, match=r"boxes \(2, 4\), scores \(1,\)"):
        Detections(np.zeros((2, 4)), np.zeros(1), np.zeros(2))


# ---- signals, masks, points -------------------------------------------------------------------

def test_sqnr_of_a_known_signal_and_noise():
    ref = np.full(100, 2.0)                                # signal power sum 100 * 4 = 400
    noise = np.where(np.arange(100) % 2, 0.02, -0.02)      # noise sum 100 * 0.0004 = 0.04
    assert sqnr_db(ref, ref + noise) == pytest.approx(40.0)   # 10 log10(400 / 0.04)
    assert sqnr_db(ref, ref) == math.inf
    assert sqnr_db(np.zeros(3), np.ones(3)) == -math.inf


def test_mask_iou_and_point_errors():
    a = np.zeros((4, 4), bool)
    b = np.zeros((4, 4), bool)
    a[:2] = True                       # 8 pixels
    b[1:3] = True                      # 8 pixels, 4 shared: 4 / 12
    assert mask_iou(a, b) == pytest.approx(1 / 3)
    assert mask_iou(np.zeros(3, bool), np.zeros(3, bool)) == 1.0
    np.testing.assert_allclose(point_errors([[0, 0], [1, 1]], [[3, 4], [1, 1]]), [5, 0])
    with pytest.raises(ValueError, match=r"\(2, 2\) and \(1, 2\)"):
        point_errors([[0, 0], [1, 1]], [[3, 4]])


# ---- decoders ------------------------------------------------------------------------------

def test_yolov8_keeps_the_best_class_and_suppresses_overlaps():
    out = np.zeros((1, 4 + 2, 3), np.float32)
    out[0, :4, 0] = [50, 50, 20, 20]          # box [40, 40, 60, 60]
    out[0, :4, 1] = [51, 50, 20, 20]          # the same face, IoU 19 * 20 / 420 = 0.9
    out[0, :4, 2] = [10, 10, 4, 4]
    out[0, 4:, 0] = [0.1, 0.8]                # class 1 at 0.8
    out[0, 4:, 1] = [0.7, 0.3]                # class 0 at 0.7: class-agnostic NMS drops it
    out[0, 4:, 2] = [0.22, 0.0]               # a candidate (>= 0.2) but not above 0.25
    d = decode_yolov8(out)
    np.testing.assert_allclose(d.boxes, [[40, 40, 60, 60]])
    assert d.labels.tolist() == [1] and d.scores.tolist() == pytest.approx([0.8])


def test_blazeface_box_from_one_anchor():
    anchors = np.array([[0.5, 0.5], [0.25, 0.25]])
    reg = np.zeros((1, 2, 16), np.float32)
    reg[0, 0, :4] = [0, 0, 64, 32]            # centre on the anchor, 64 x 32 of 256 pixels
    logits = np.array([[[1.0], [-1.0]]], np.float32)   # only the first passes 0.5
    d = decode_blazeface(reg, logits, anchors, 256)
    np.testing.assert_allclose(d.boxes, [[0.375, 0.4375, 0.625, 0.5625]])
    assert d.scores == pytest.approx([1 / (1 + math.exp(-1))])


def test_picodet_stride_and_box_from_one_anchor():
    assert picodet_stride(7600, 800, 608) == 8 and picodet_stride(130, 800, 608) == 64
    with pytest.raises(ValueError, match="no power-of-two stride gives 7 anchors"):
        picodet_stride(7, 800, 608)
    # a 16 x 16 input at stride 8: 2 x 2 anchors; the last (row 1, col 1) is centred at (12, 12)
    scores = np.zeros((1, 4, 3), np.float32)
    scores[0, 3, 1] = 0.9
    logits = np.full((1, 4, 4 * 8), -50, np.float32)
    logits[0, :, 2::8] = 50                   # every side's softmax is all on bin 2: 2 * 8 = 16
    d = decode_picodet([(scores, logits)], 16, 16)
    np.testing.assert_allclose(d.boxes, [[-4, -4, 28, 28]], atol=1e-9)
    assert d.labels.tolist() == [1] and d.scores.tolist() == pytest.approx([0.9])


def test_db_text_boxes_keep_confident_lines_of_some_size():
    prob = np.zeros((1, 1, 40, 60), np.float32)
    prob[0, 0, 5:15, 5:50] = 0.9             # a text line
    prob[0, 0, 20:30, 5:20] = 0.4            # above 0.3, but its mean 0.4 is not above 0.5
    prob[0, 0, 35:37, 40:42] = 0.9           # 2 x 2: too small
    d = db_text_boxes(prob)
    np.testing.assert_allclose(d.boxes, [[5, 5, 50, 15]])


def test_blazeface_anchor_layout_derived_from_the_model():
    from tengine_host.model import load_model

    graph = load_model(shared_path("models", "blazeface_back_256.onnx"))
    anchors = ssd_anchor_centers(graph, "classificators")
    # SOURCES.md: 16 x 16 cells x 2, then 8 x 8 cells x 6; rows outer, then columns
    assert anchors.shape == (896, 2)
    np.testing.assert_allclose(anchors[[0, 1, 2, 32]], [[1 / 32, 1 / 32], [1 / 32, 1 / 32],
                                                        [3 / 32, 1 / 32], [1 / 32, 3 / 32]])
    np.testing.assert_allclose(anchors[512:518], [[1 / 16, 1 / 16]] * 6)
    np.testing.assert_allclose(anchors[-1], [15 / 16, 15 / 16])


# ---- image sets ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(MODELS))
def test_image_sets_are_disjoint_repeatable_and_fit_the_input(name):
    pytest.importorskip("skimage.data", reason="scikit-image (dev extras) makes the images")
    from benchmarks.accuracy import MAX_CALIBRATION

    model = MODELS[name]
    calibration, test = model.images("calibration"), model.images("test")
    assert len(calibration) >= MAX_CALIBRATION and len(test) >= 10

    def digest(image: np.ndarray) -> str:
        return hashlib.sha256(f"{image.shape}".encode() + image.tobytes()).hexdigest()

    assert not {digest(i) for i in calibration} & {digest(i) for i in test}
    assert [digest(i) for i in model.images("test")] == [digest(i) for i in test]
    for image in calibration[:2] + test[:2]:
        assert image.dtype == np.uint8 and image.shape[2] == 3
        x = model.preprocess(image)
        assert x.shape == (1, 3, model.height, model.width) and x.dtype == np.float32


# ---- end to end ----------------------------------------------------------------------------

@pytest.mark.conformance
def test_small_model_end_to_end(tmp_path):
    """The text-orientation classifier with 2 calibration and 2 test images, the default
    methods."""
    pytest.importorskip("skimage.data", reason="scikit-image (dev extras) makes the images")
    shared_path("models", "ppocr_mobile_v2_cls_48x192.onnx")
    from benchmarks.accuracy import default_methods, main

    out = tmp_path / "acc.json"
    assert main(["--models", "ppocr_mobile_v2_cls_48x192", "--calib", "2", "--test", "2",
                 "--json", str(out), "--no-progress"]) == 0
    (model,) = json.loads(out.read_text())["models"]
    assert (model["calibration_images"], model["test_images"]) == (2, 2)
    rows = {r["method"]: r for r in model["methods"]}
    assert list(rows) == default_methods()
    for r in rows.values():
        assert r["metrics"]["top1"] in (0.0, 0.5, 1.0)
        assert set(r["outputs"]) == {"save_infer_model/scale_0.tmp_1"}
    # two fp32 engines agree: the comparison itself adds no error
    fp32 = rows["ort-fp32"]
    assert fp32["metrics"]["top1"] == 1.0
    assert fp32["outputs"]["save_infer_model/scale_0.tmp_1"]["cosine"] > 0.99999
