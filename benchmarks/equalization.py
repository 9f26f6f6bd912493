"""Cross-layer equalization and bias correction: int8 accuracy against fp32 on real models.

Usage::

    python benchmarks/equalization.py [MODEL ...] [--preset nv_small] [--jitter 5]
                                      [--per-output]

For each model of ``../shared/models`` (default: face_landmark_192,
ppocr_mobile_v2_cls_48x192, ch_PP-OCRv4_det_320, picodet_layout_cdla) and each
of four rewrites (none, CLE = :func:`~tengine_host.quant.equalize.equalize`,
BC = :func:`~tengine_host.quant.bias_correction.correct_bias` with the
compiler's weight quantizer, both = CLE then BC), the rewritten graph is
calibrated (min-max) on eight scikit-image photos and run on others (32 faces,
44 text lines or 6 photos) by the int8 CPU reference
(``get_device("cpu", precision="int8")``: exactly what the DLA computes).
Each output is compared with the fp32 output of the original graph on the
same photo:

* ``SQNR``: ``10 log10(sum y**2 / sum (y_int8 - y)**2)`` in dB;
* ``cos``: cosine similarity of the flattened outputs;
* ``w8 SQNR``: the same with int8 weights but fp32 activations (the error bias
  correction addresses, isolated from the activations' rounding).

Both sum their products over the test photos (one vector per output made of
every photo's values), then are averaged over the model's outputs.

End to end, which values round which way decides much: scaling every
activation scale by 1.001 moves a model's SQNR by up to a dB or two.  So each
rewrite runs with ``--jitter`` tables, its calibrated scales times
``1 + 0.001 k`` (k centred on 0), and prints the mean and standard deviation
over them: differences within a few deviations are noise.

Outputs are compared before a final Sigmoid or Softmax (the logits):
probabilities saturate, and a text detector's map of a photo without text is
almost zero everywhere.  Photos are model-appropriate: face crops
(``lfw_subset``) for the face landmarks, text lines of ``page`` for the
text-orientation classifier, whole photos otherwise; each resized (PIL
bilinear) and normalized as the model's package does
(``../shared/models/SOURCES.md``).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from accel.compiler.quantize import quantize_weights
from accel.ir import Graph
from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.quant import QuantTable, calibrate
from tengine_host.quant.bias_correction import correct_bias
from tengine_host.quant.equalize import equalize
from tengine_host.quant.layers import WEIGHTED_OPS, copy_graph, read_layer, write_layer

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "models"
#: relative step between the jittered tables' scales
JITTER_STEP = 1e-3
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


@dataclass(frozen=True)
class ModelSpec:
    input: str
    hw: tuple[int, int]
    normalize: str                  # "unit" [0, 1], "signed" [-1, 1], "imagenet"
    bgr: bool                       # the package feeds BGR
    photos: Callable[[], tuple[list[np.ndarray], list[np.ndarray]]]  # (calibration, test)


def _general_photos() -> tuple[list[np.ndarray], list[np.ndarray]]:
    import skimage.data as d

    calib = [d.astronaut(), d.chelsea(), d.coffee(), d.camera(), d.text(), d.page(),
             d.rocket(), d.immunohistochemistry()]
    # (skimage's cat() is chelsea(): not a test image here)
    test = [d.coins(), d.clock(), d.hubble_deep_field(), d.moon(), d.stereo_motorcycle()[0],
            d.brick()]
    return calib, test


def _faces() -> tuple[list[np.ndarray], list[np.ndarray]]:
    import skimage.data as d

    faces = [(f * 255).astype(np.uint8) for f in d.lfw_subset()[:40]]  # the first 100 are faces
    return [d.astronaut()[0:220, 140:330], *faces[:7]], faces[8:40]


def _text_lines() -> tuple[list[np.ndarray], list[np.ndarray]]:
    import skimage.data as d

    spec = importlib.util.spec_from_file_location(
        "text_orientation_set", REPO / "scripts" / "text_orientation_set.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    crops = module.text_crops(d.page())              # 52 lines, half of them turned by 180
    calib, test = crops[0:16:2], crops[1:16:2] + crops[16:]
    return calib, [c if i % 2 else c[::-1, ::-1] for i, c in enumerate(test)]


MODELS = {
    "face_landmark_192": ModelSpec("input_1", (192, 192), "unit", False, _faces),
    "ppocr_mobile_v2_cls_48x192": ModelSpec("x", (48, 192), "signed", False, _text_lines),
    "ch_PP-OCRv4_det_320": ModelSpec("x", (320, 320), "signed", True, _general_photos),
    "picodet_layout_cdla": ModelSpec("image", (800, 608), "imagenet", True, _general_photos),
}


def _tensor(img: np.ndarray, spec: ModelSpec) -> dict[str, np.ndarray]:
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.stack([img] * 3, -1)
    img = Image.fromarray(img[..., :3]).resize((spec.hw[1], spec.hw[0]), Image.BILINEAR)
    x = np.asarray(img, np.float32) / 255.0
    if spec.bgr:
        x = x[..., ::-1]
    if spec.normalize == "signed":
        x = (x - 0.5) / 0.5
    elif spec.normalize == "imagenet":
        x = (x - IMAGENET_MEAN) / IMAGENET_STD
    return {spec.input: np.ascontiguousarray(x.transpose(2, 0, 1)[None], np.float32)}


def _logits(graph: Graph) -> Graph:
    """``graph`` ending before the Sigmoid / Softmax (and the Reshape / Transpose after
    them) that end its outputs: a saturated probability hides any error of its logit,
    and an almost-zero map (no text in a photo) makes a ratio of energies meaningless."""
    outputs = []
    for t in graph.outputs:
        node = graph.producer(t)
        while node is not None and node.op_type in ("Reshape", "Transpose", "Flatten"):
            node = graph.producer(node.inputs[0])
        squashing = node is not None and node.op_type in ("Sigmoid", "Softmax")
        outputs.append(node.inputs[0] if squashing else t)
    needed, todo = set(), list(outputs)
    while todo:
        node = graph.producer(todo.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            todo.extend(t for t in node.inputs if t)
    nodes = [n for n in graph.nodes if id(n) in needed]
    return Graph(graph.name, nodes, graph.tensors, graph.inputs, outputs)


def _int8_weights(graph: Graph) -> Graph:
    """``graph`` with every Conv/Gemm weight replaced by its int8 value (dequantized)."""
    out = copy_graph(graph)
    for node in out.nodes:
        layer = read_layer(out, node) if node.op_type in WEIGHTED_OPS else None
        if layer is None or isinstance(layer, str):
            continue
        q, s = quantize_weights(layer.weight)
        layer.weight = q * s.reshape(-1, *[1] * (q.ndim - 1))
        write_layer(out, layer, "int8", bias=False)
    return out


class Score:
    """Per output, sums over the test images: ``y . y``, ``q . q``, ``y . q`` and the
    squared error, so that SQNR and cosine weigh every value alike (a per-image mean
    would let one image dominate, and a scalar output's cosine is only its sign)."""

    def __init__(self) -> None:
        self.sums: dict[str, np.ndarray] = {}

    def add(self, want: dict[str, np.ndarray], got: dict[str, np.ndarray]) -> None:
        for name, y in want.items():
            y, q = y.astype(np.float64).ravel(), got[name].astype(np.float64).ravel()
            step = np.array([y @ y, q @ q, y @ q, (q - y) @ (q - y)])
            self.sums[name] = self.sums.get(name, 0.0) + step

    def sqnr(self, name: str) -> float:
        """dB."""
        yy, _, _, err = self.sums[name]
        return 10 * np.log10(yy / err) if err > 0 else np.inf

    def cosine(self, name: str) -> float:
        yy, qq, yq, _ = self.sums[name]
        return yq / np.sqrt(yy * qq) if yy * qq > 0 else 1.0

    def mean(self) -> tuple[float, float]:
        """SQNR and cosine averaged over the outputs."""
        return (float(np.mean([self.sqnr(n) for n in self.sums])),
                float(np.mean([self.cosine(n) for n in self.sums])))


def _rewrites(graph: Graph, calib: list[dict], dla) -> dict[str, Graph]:
    def bc(g: Graph) -> Graph:
        # only the layers the DLA runs have int8 weights: the others keep their biases
        return correct_bias(g, calib, quantize_weights,
                            int8_nodes=lambda node: dla.supports(node, g)[0])[0]

    cle = equalize(graph)[0]
    return {"none": graph, "CLE": cle, "BC": bc(graph), "both": bc(cle)}


def _jittered(table: QuantTable, factor: float) -> QuantTable:
    return QuantTable({t: dict(e, scale=e["scale"] * factor) for t, e in table.items()})


def run_model(name: str, preset: str, jitter: int, per_output: bool) -> None:
    spec = MODELS[name]
    calib_imgs, test_imgs = spec.photos()
    graph = _logits(load_model(SHARED / f"{name}.onnx",
                               input_shapes={spec.input: (1, 3, *spec.hw)}))
    calib = [_tensor(i, spec) for i in calib_imgs]
    test = [_tensor(i, spec) for i in test_imgs]
    want = [interpret(graph, x) for x in test]
    dla = get_device("nvdla", preset=preset)
    _, report = equalize(graph)
    factors = 1 + JITTER_STEP * (np.arange(jitter) - (jitter - 1) / 2)
    print(f"\n{name}: {len(calib)} calibration / {len(test)} test images, {jitter} table(s); "
          f"CLE: {len(report.pairs)} pairs, {len(report.skipped)} skipped")
    print(f"  {'rewrite':8s} {'SQNR dB':>14s} {'cos':>9s} {'w8 SQNR':>8s}  {'time':>6s}")
    for label, g in _rewrites(graph, calib, dla).items():
        start = time.perf_counter()
        table = calibrate(g, calib, progress=False)
        w8 = _int8_weights(g)
        score_w8 = Score()
        for x, y in zip(test, want, strict=True):
            score_w8.add(y, interpret(w8, x))
        scores = []
        for factor in factors:
            score = Score()
            with Executor(g, [get_device("cpu", precision="int8", preset=preset)],
                          _jittered(table, factor)) as ex:
                for x, y in zip(test, want, strict=True):
                    score.add(y, ex.run(x))
            scores.append(score)
        sqnr, cos = np.array([s.mean() for s in scores]).T
        print(f"  {label:8s} {sqnr.mean():7.2f} ± {sqnr.std():4.2f} {cos.mean():9.6f} "
              f"{score_w8.mean()[0]:8.2f}  {time.perf_counter() - start:5.1f}s", flush=True)
        if per_output:
            for out in graph.outputs:
                per = np.array([s.sqnr(out) for s in scores])
                print(f"    {out:24s} {per.mean():7.2f} ± {per.std():4.2f} "
                      f"{np.mean([s.cosine(out) for s in scores]):9.6f} "
                      f"{score_w8.sqnr(out):8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", default=list(MODELS),
                        help=f"models (default: all of {', '.join(MODELS)})")
    parser.add_argument("--preset", default="nv_small")
    parser.add_argument("--jitter", type=int, default=5,
                        help="tables per rewrite: the calibrated scales times 1 + 0.001 k, "
                             "centred on k = 0 (default 5)")
    parser.add_argument("--per-output", action="store_true", help="print each output's numbers")
    args = parser.parse_args()
    for name in args.models:
        if name not in MODELS:
            parser.error(f"model {name!r} not in {', '.join(MODELS)}")
        if not (SHARED / f"{name}.onnx").exists():
            parser.error(f"{SHARED / name}.onnx not found (the shared models sit beside the "
                         f"repository)")
    for name in args.models:
        run_model(name, args.preset, args.jitter, args.per_output)


if __name__ == "__main__":
    main()
