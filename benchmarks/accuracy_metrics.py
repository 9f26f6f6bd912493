"""How far an int8 answer is from fp32's, in the terms each kind of model is judged by.

Pure numpy, no model knowledge: boxes are ``(x1, y1, x2, y2)`` rows in any one
unit, a detector's answer is a :class:`Detections`, and every comparison takes
fp32's answer as the reference (what the int8 model should have said).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Detections:
    """A detector's final answer for one image: ``n`` boxes after its own threshold and NMS.

    ``boxes`` is ``(n, 4)`` float ``x1, y1, x2, y2``; ``scores`` and ``labels``
    (class indices; all 0 for a one-class detector) are ``(n,)``.
    """

    boxes: np.ndarray
    scores: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.boxes)
        if np.shape(self.boxes) not in ((n, 4), (0,)) or len(self.scores) != n \
                or len(self.labels) != n:
            raise ValueError(f"detections need (n, 4) boxes with n scores and n labels, got "
                             f"boxes {np.shape(self.boxes)}, scores {np.shape(self.scores)}, "
                             f"labels {np.shape(self.labels)}")

    def __len__(self) -> int:
        return len(self.scores)


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(len(a), len(b))`` intersection over union of two sets of ``x1, y1, x2, y2`` boxes.

    A box with no area (x2 <= x1 or y2 <= y1) overlaps nothing: its IoU is 0,
    including with itself.
    """
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(w, 0, None) * np.clip(h, 0, None)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float,
        max_keep: int | None = None) -> np.ndarray:
    """Greedy hard non-maximum suppression: indices of the kept boxes, best score first.

    The best remaining box is kept and every box overlapping it by IoU strictly
    above ``iou_threshold`` is dropped (OpenCV's ``NMSBoxes`` and PaddleDetection's
    ``hard_nms`` both suppress on ``>``).  Equal scores keep their input order.
    """
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    iou = box_iou(boxes, boxes)
    keep: list[int] = []
    alive = np.ones(len(order), bool)
    for rank, i in enumerate(order):
        if not alive[rank]:
            continue
        keep.append(int(i))
        if max_keep is not None and len(keep) == max_keep:
            break
        alive[rank + 1:] &= iou[i, order[rank + 1:]] <= iou_threshold
    return np.array(keep, np.int64)


def weighted_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """MediaPipe's "weighted" suppression (BlazeFace): overlapping boxes are averaged, not dropped.

    The best remaining box gathers every remaining box whose IoU with it is
    above ``iou_threshold`` (itself included); their score-weighted mean
    becomes one output box carrying the best box's score.  Returns
    ``(boxes, scores)``, best first.
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    scores = np.asarray(scores, np.float64)
    order = np.argsort(-scores, kind="stable")
    iou = box_iou(boxes, boxes)
    out_boxes, out_scores = [], []
    remaining = list(order)
    while remaining:
        best = remaining[0]
        cluster = [i for i in remaining if i == best or iou[best, i] > iou_threshold]
        w = scores[cluster]
        out_boxes.append((boxes[cluster] * w[:, None]).sum(0) / w.sum())
        out_scores.append(scores[best])
        remaining = [i for i in remaining if i not in cluster]
    return np.array(out_boxes).reshape(-1, 4), np.array(out_scores)


def match_detections(got: Detections, ref: Detections, iou_threshold: float = 0.5
                     ) -> tuple[int, int, int]:
    """``(true positives, false positives, false negatives)`` of ``got`` against ``ref``.

    Pascal VOC's greedy matching: ``got``'s boxes, best score first, each take
    the unmatched ``ref`` box of the same label with the highest IoU, if that IoU
    is at least ``iou_threshold``; a ``got`` box left without one is a false
    positive, a ``ref`` box nobody took a false negative.
    """
    iou = box_iou(got.boxes, ref.boxes)
    taken = np.zeros(len(ref), bool)
    tp = 0
    for i in np.argsort(-np.asarray(got.scores, np.float64), kind="stable"):
        candidates = np.where(~taken & (ref.labels == got.labels[i]), iou[i], -1.0)
        j = int(np.argmax(candidates)) if len(ref) else -1
        if j >= 0 and candidates[j] >= iou_threshold:
            taken[j] = True
            tp += 1
    return tp, len(got) - tp, len(ref) - tp


def precision_recall(tp: int, fp: int, fn: int) -> tuple[float, float]:
    """Precision ``tp / (tp + fp)`` and recall ``tp / (tp + fn)``; NaN where nothing was counted
    (no boxes found: precision undefined; no reference boxes: recall undefined)."""
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    return precision, recall


def sqnr_db(ref: np.ndarray, got: np.ndarray) -> float:
    """Signal-to-quantization-noise ratio ``10 log10(sum ref^2 / sum (got - ref)^2)`` in dB.

    ``inf`` when ``got`` equals ``ref``; ``-inf`` when ``ref`` is all zeros but ``got`` is not.
    """
    ref = np.asarray(ref, np.float64)
    noise = float(np.sum((np.asarray(got, np.float64) - ref) ** 2))
    signal = float(np.sum(ref ** 2))
    if noise == 0:
        return math.inf
    if signal == 0:
        return -math.inf
    return 10 * math.log10(signal / noise)


def mask_iou(ref: np.ndarray, got: np.ndarray) -> float:
    """Intersection over union of two boolean masks; 1 when both are empty (they agree)."""
    ref, got = np.asarray(ref, bool), np.asarray(got, bool)
    union = int(np.count_nonzero(ref | got))
    return 1.0 if union == 0 else int(np.count_nonzero(ref & got)) / union


def point_errors(ref: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Euclidean distance between corresponding points of two ``(n, d)`` arrays."""
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    if ref.shape != got.shape or ref.ndim != 2:
        raise ValueError(f"point sets must both be (n, d), got {ref.shape} and {got.shape}")
    return np.sqrt(((got - ref) ** 2).sum(1))
