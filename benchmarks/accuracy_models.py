"""The models of ``../shared/models`` as the accuracy benchmark sees them.

Each :class:`BenchModel` knows its input (name, size, the preprocessing of the
package it ships in, as ``SOURCES.md`` records it), the real images it can
respond to (:mod:`benchmarks.accuracy_images`), how its outputs become the
answer a user sees (:mod:`benchmarks.accuracy_decode`) and how to score one
answer against fp32's: ``score(fp32 answers, int8 answers)`` over the test set.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from accel.ir import Graph
from benchmarks import accuracy_images as images
from benchmarks.accuracy_decode import (
    db_text_boxes,
    decode_blazeface,
    decode_picodet,
    decode_yolov8,
    ssd_anchor_centers,
)
from benchmarks.accuracy_metrics import (
    Detections,
    mask_iou,
    match_detections,
    point_errors,
    precision_recall,
)

#: where the models are: ``$OPENDLA_SHARED/models``, by default ``shared/`` beside the repository
MODELS_DIR = Path(os.environ.get("OPENDLA_SHARED",
                                 Path(__file__).resolve().parents[2] / "shared")) / "models"

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def nchw(x: np.ndarray) -> np.ndarray:
    """An ``(H, W, 3)`` image as a ``(1, 3, H, W)`` float32 batch of one."""
    return np.ascontiguousarray(np.asarray(x, np.float32).transpose(2, 0, 1)[None])


def letterbox(image: np.ndarray, size: int, *, centre: bool) -> np.ndarray:
    """``image`` scaled to fit a ``size`` square, padded with black: around it (``centre``)
    or below and to the right of it."""
    h, w = image.shape[:2]
    scale = size / max(h, w)
    rw, rh = max(1, round(w * scale)), max(1, round(h * scale))
    canvas = np.zeros((size, size, 3), np.uint8)
    top, left = ((size - rh) // 2, (size - rw) // 2) if centre else (0, 0)
    images.paste(canvas, images.resize(image, rw, rh), top, left)
    return canvas


def detection_score(refs: list[Detections], gots: list[Detections]) -> dict[str, float]:
    """Precision and recall of every int8 box against fp32's over the test set (IoU >= 0.5,
    same class), and how many boxes fp32 found."""
    tp = fp = fn = 0
    for ref, got in zip(refs, gots, strict=True):
        t, f, n = match_detections(got, ref)
        tp, fp, fn = tp + t, fp + f, fn + n
    precision, recall = precision_recall(tp, fp, fn)
    return {"precision": precision, "recall": recall, "fp32_boxes": tp + fn}


class BenchModel:
    """One model of the benchmark: subclasses set the attributes and the four methods."""

    name: str
    input: str
    height: int
    width: int
    #: the file's input has dynamic dimensions that must be fixed to ``(1, 3, height, width)``
    dynamic_input = False
    #: metric key -> column heading, in table order (what :meth:`score` returns)
    columns: dict[str, str]
    #: the metrics that sum the model up in the summary table
    headline: tuple[str, ...]

    @property
    def path(self) -> Path:
        return MODELS_DIR / f"{self.name}.onnx"

    @property
    def input_shapes(self) -> dict[str, tuple[int, ...]] | None:
        return {self.input: (1, 3, self.height, self.width)} if self.dynamic_input else None

    def images(self, split: str) -> list[np.ndarray]:
        """RGB images of ``split`` (``"calibration"`` or ``"test"``)."""
        raise NotImplementedError

    def preprocess(self, image: np.ndarray) -> np.ndarray:
        """The model's input for one RGB image, as its package prepares it."""
        raise NotImplementedError

    def prepare(self, graph: Graph) -> None:
        """Read what decoding needs from the imported graph (anchors, levels)."""

    def answer(self, outputs: dict[str, np.ndarray]) -> Any:
        """What a user of the model gets from one inference's outputs."""
        raise NotImplementedError

    def score(self, refs: list[Any], gots: list[Any]) -> dict[str, float]:
        """Agreement of int8 answers ``gots`` with fp32's ``refs`` over the test set."""
        raise NotImplementedError

    def feeds(self, split: str, limit: int | None = None) -> list[dict[str, np.ndarray]]:
        """Input feeds of the first ``limit`` images of ``split``."""
        return [{self.input: self.preprocess(img)} for img in self.images(split)[:limit]]


class FaceLandmarks(BenchModel):
    """MediaPipe face mesh: 468 points, scored by their distance (input pixels) from fp32's."""

    name, input, height, width = "face_landmark_192", "input_1", 192, 192
    columns = {"mean_px": "mean px", "max_px": "max px"}
    headline = ("mean_px",)

    def images(self, split):
        return images.face_crops(split)

    def preprocess(self, image):
        return nchw(images.resize(image, self.width, self.height) / np.float32(255))

    def answer(self, outputs):
        return outputs["conv2d_20"].reshape(468, 3)[:, :2]

    def score(self, refs, gots):
        err = np.concatenate([point_errors(r, g) for r, g in zip(refs, gots, strict=True)])
        return {"mean_px": float(err.mean()), "max_px": float(err.max())}


class BlazeFace(BenchModel):
    """MediaPipe's back-camera face detector: boxes after its threshold and weighted NMS."""

    name, input, height, width = "blazeface_back_256", "input", 256, 256
    columns = {"precision": "P", "recall": "R", "fp32_boxes": "fp32 boxes"}
    headline = ("precision", "recall")

    def images(self, split):
        return images.people_scenes(split)

    def preprocess(self, image):
        return nchw(letterbox(image, self.width, centre=True) / np.float32(127.5) - 1)

    def prepare(self, graph):
        self.anchors = ssd_anchor_centers(graph, "classificators")

    def answer(self, outputs):
        return decode_blazeface(outputs["regressors"], outputs["classificators"], self.anchors,
                                self.width)

    def score(self, refs, gots):
        return detection_score(refs, gots)


class NudeNet(BenchModel):
    """YOLOv8n (NudeNet's 18 classes, faces among them): boxes after its threshold and NMS."""

    name, input, height, width = "yolov8n_nudenet_320", "images", 320, 320
    dynamic_input = True
    columns, headline = BlazeFace.columns, BlazeFace.headline

    def images(self, split):
        return images.people_scenes(split)

    def preprocess(self, image):
        return nchw(letterbox(image, self.width, centre=False) / np.float32(255))

    def answer(self, outputs):
        return decode_yolov8(outputs["output0"])

    def score(self, refs, gots):
        return detection_score(refs, gots)


class LayoutPicoDet(BenchModel):
    """PicoDet document layout (CDLA's 10 region classes): regions after its threshold and NMS."""

    name, input, height, width = "picodet_layout_cdla", "image", 800, 608
    columns, headline = BlazeFace.columns, BlazeFace.headline
    #: pages per split: as many calibration pages as a run may use, and the fewest test
    #: pages the benchmark accepts (an int8 inference of this model takes seconds)
    pages = {"calibration": 16, "test": 10}

    def images(self, split):
        return images.documents(split, self.pages.get(split, 0))

    def preprocess(self, image):
        bgr = images.resize(image, self.width, self.height)[..., ::-1] / np.float32(255)
        return nchw((bgr - IMAGENET_MEAN) / IMAGENET_STD)   # the package's order: B gets R's

    def prepare(self, graph):
        """Pair each level's class scores with its box distributions (same anchor count)."""
        shapes = {t: graph.tensors[t].shape for t in graph.outputs}
        classes = min(s[-1] for s in shapes.values())
        scores = {s[1]: t for t, s in shapes.items() if s[-1] == classes}
        boxes = {s[1]: t for t, s in shapes.items() if s[-1] != classes}
        self.levels = [(scores[n], boxes[n]) for n in sorted(scores, reverse=True)]

    def answer(self, outputs):
        return decode_picodet([(outputs[s], outputs[b]) for s, b in self.levels],
                              self.height, self.width)

    def score(self, refs, gots):
        return detection_score(refs, gots)


class TextDetector(BenchModel):
    """PP-OCRv4's DB text detector: the text map (probability > 0.3) and its line boxes."""

    name, input, height, width = "ch_PP-OCRv4_det_320", "x", 320, 320
    columns = {"map_iou": "map IoU", "map_iou_min": "min IoU", "precision": "box P",
               "recall": "box R", "fp32_boxes": "fp32 boxes"}
    headline = ("map_iou",)

    def images(self, split):
        return images.text_pictures(split)

    def preprocess(self, image):
        bgr = images.resize(image, self.width, self.height)[..., ::-1]
        return nchw(bgr / np.float32(127.5) - 1)

    def answer(self, outputs):
        prob = outputs["sigmoid_0.tmp_0"]
        return prob[0, 0] > 0.3, db_text_boxes(prob)

    def score(self, refs, gots):
        ious = [mask_iou(r[0], g[0]) for r, g in zip(refs, gots, strict=True)]
        return {"map_iou": float(np.mean(ious)), "map_iou_min": float(np.min(ious)),
                **detection_score([r[1] for r in refs], [g[1] for g in gots])}


class TextOrientation(BenchModel):
    """PaddleOCR's text-line direction classifier (0 / 180 degrees): top-1 agreement."""

    name, input, height, width = "ppocr_mobile_v2_cls_48x192", "x", 48, 192
    dynamic_input = True
    columns = {"top1": "top-1 agree"}
    headline = ("top1",)

    def images(self, split):
        return images.text_line_pictures(split)

    def preprocess(self, image):
        """PaddleOCR's ``resize_norm_img``: height 48 keeping the aspect (at most 192 wide),
        to [-1, 1], zero (mid-grey) padding on the right."""
        h, w = image.shape[:2]
        rw = min(self.width, math.ceil(self.height * w / h))
        x = np.zeros((self.height, self.width, 3), np.float32)
        x[:, :rw] = images.resize(image, rw, self.height) / np.float32(127.5) - 1
        return nchw(x)

    def answer(self, outputs):
        return int(np.argmax(next(iter(outputs.values()))))

    def score(self, refs, gots):
        return {"top1": float(np.mean([r == g for r, g in zip(refs, gots, strict=True)]))}


MODELS: dict[str, BenchModel] = {m.name: m for m in (
    BlazeFace(), TextDetector(), FaceLandmarks(), LayoutPicoDet(), TextOrientation(), NudeNet())}
