"""What zero points buy: real models, int8 with and without them, against fp32.

Usage::

    python benchmarks/zero_points.py [MODEL ...] [--preset nv_small] [--shared DIR]
                                     [--algorithm minmax] [--dla]

For each model of ``../shared/models`` (default: face_landmark_192,
ch_PP-OCRv4_det_320, ppocr_mobile_v2_cls_48x192, blazeface_back_256): the model
is calibrated on
four scikit-image photos (astronaut's face, chelsea, coffee, rocket) and run on
fifteen other, held-out ones (camera, page, text, immunohistochemistry, brick,
grass, cat, colorwheel, crops of hubble_deep_field, retina and astronaut's
suit, four faces of ``lfw_subset``) through the int8 CPU reference of ``--preset``
(what the DLA computes, bit for bit: every op the DLA runs goes through the op
table's int8 reference, the rest in fp32), twice:

* ``symmetric``: the calibrated table as ``opendla quantize`` writes it;
* ``zero points``: the same table through :func:`assign_zero_points` (one-signed
  tensors at zero point -128, twice the resolution).

Printed per model output (and per input of an output Softmax: the logits, which a
handful of probabilities near 0 or 1 would hide): the cosine similarity and the
SQNR (dB, signal power over the power of the difference) of the int8 result
against fp32 over all held-out images, and how many activations took a zero
point.  ``--dla`` also runs
the first held-out image through the ``nvdla`` device (the cmodel) with the zero-point
table and checks every DLA tensor against the int8 reference (``verify_run``).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from tengine_host.devices import get_device
from tengine_host.executor import Executor
from tengine_host.interpreter import interpret
from tengine_host.model import load_model
from tengine_host.quant import calibrate
from tengine_host.quant.zero_point import assign_zero_points

SHARED = Path(os.environ.get("OPENDLA_SHARED", Path(__file__).resolve().parents[2] / "shared"))

#: model file -> (input name, input shape, pixel range): [0, 1] or [-1, 1] (mean = std = 0.5)
MODELS = {
    "face_landmark_192": ("input_1", (1, 3, 192, 192), "unit"),
    "ch_PP-OCRv4_det_320": ("x", (1, 3, 320, 320), "signed"),
    "ppocr_mobile_v2_cls_48x192": ("x", (1, 3, 48, 192), "signed"),
    "blazeface_back_256": ("input", (1, 3, 256, 256), "signed"),
}


def _photos() -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(calibration, held-out) uint8 photos from scikit-image."""
    import skimage.data as d

    faces = [(d.lfw_subset()[i] * 255).astype(np.uint8) for i in (7, 31, 64, 90)]
    calib = [d.astronaut()[0:220, 140:330], d.chelsea(), d.coffee(), d.rocket()]
    held = [d.camera(), d.page(), d.text(), d.immunohistochemistry(), d.brick(), d.grass(),
            d.cat(), d.colorwheel(), d.hubble_deep_field()[:400, :400],
            d.retina()[400:1000, 400:1000], d.astronaut()[250:, 200:], *faces]
    return calib, held


def _tensor(img: np.ndarray, shape: tuple[int, ...], pixels: str) -> np.ndarray:
    """A photo resized (bilinear) to the NCHW ``shape``, scaled to the model's range."""
    from PIL import Image

    img = np.asarray(img)
    if img.ndim == 2:
        img = np.stack([img] * 3, -1)
    h, w = shape[2:]
    x = np.asarray(Image.fromarray(img[..., :3]).resize((w, h), Image.BILINEAR),
                   np.float32) / 255.0
    x = (x - 0.5) / 0.5 if pixels == "signed" else x
    return x.transpose(2, 0, 1)[None]


def _measured(graph) -> list[str]:
    """The graph outputs, and the logits of those that are a Softmax of them."""
    out = []
    for o in graph.outputs:
        p = graph.producer(o)
        out += ([p.inputs[0]] if p is not None and p.op_type == "Softmax" else []) + [o]
    return out


def _scores(graph, table, feeds: list[dict], preset: str, fp32: list[dict]) -> dict:
    """``{tensor: (cosine, sqnr_db)}`` of the int8 CPU reference against fp32."""
    sums = {o: [0.0, 0.0, 0.0, 0.0] for o in _measured(graph)}   # a.b, a.a, b.b, |a-b|^2
    cpu = get_device("cpu", precision="int8", preset=preset)
    prepared = cpu.prerun(graph, table)
    for f, want in zip(feeds, fp32, strict=True):
        got = interpret(graph, f, overrides=prepared.overrides, keep_all=True)
        for o, acc in sums.items():
            a = np.asarray(got[o], np.float64).ravel()
            b = np.asarray(want[o], np.float64).ravel()
            acc[0] += float(a @ b)
            acc[1] += float(a @ a)
            acc[2] += float(b @ b)
            acc[3] += float((a - b) @ (a - b))
    return {o: (dot / np.sqrt(aa * bb), 10 * np.log10(bb / max(err, 1e-300)))
            for o, (dot, aa, bb, err) in sums.items()}


def _verify(graph, table, feeds: dict, preset: str) -> str:
    from tengine_host.verify import verify_run

    dla = get_device("nvdla", preset=preset, capture=True)
    with Executor(graph, [dla, get_device("cpu")], table) as ex:
        _, _, report = verify_run(ex, feeds)
    return report.summary()


def measure(name: str, preset: str, algorithm: str, dla: bool) -> None:
    x_name, shape, pixels = MODELS[name]
    graph = load_model(SHARED / "models" / f"{name}.onnx", input_shapes={x_name: shape})
    calib, held = _photos()
    calib_feeds = [{x_name: _tensor(i, shape, pixels)} for i in calib]
    held_feeds = [{x_name: _tensor(i, shape, pixels)} for i in held]
    t0 = time.perf_counter()
    sym = calibrate(graph, calib_feeds, algorithm=algorithm, progress=False)
    zp = assign_zero_points(graph, sym)
    fp32 = [interpret(graph, f, keep_all=True) for f in held_feeds]
    rows = {"symmetric": _scores(graph, sym, held_feeds, preset, fp32),
            "zero points": _scores(graph, zp, held_feeds, preset, fp32)}
    taken = sum(1 for e in zp.values() if e.get("zero_point"))
    print(f"\n{name} ({preset}, {algorithm}; {taken} of {len(zp)} activations take a zero "
          f"point; {len(held_feeds)} held-out photos; {time.perf_counter() - t0:.0f} s)")
    print(f"  {'output':24s} {'table':12s} {'cosine':>10s} {'SQNR dB':>8s}")
    for out in _measured(graph):
        for label, scores in rows.items():
            cos, sqnr = scores[out]
            print(f"  {out[:24]:24s} {label:12s} {cos:10.6f} {sqnr:8.2f}")
    if dla:
        print(f"  nvdla, first held-out photo: {_verify(graph, zp, held_feeds[0], preset)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="*", default=list(MODELS),
                   help=f"models of ../shared/models (default: {', '.join(MODELS)})")
    p.add_argument("--preset", default="nv_small")
    p.add_argument("--algorithm", default="minmax", choices=("minmax", "kl", "percentile"))
    p.add_argument("--dla", action="store_true",
                   help="also verify one photo on the cmodel against the int8 reference")
    args = p.parse_args()
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error(f"model(s) {', '.join(unknown)} not in {', '.join(MODELS)}")
    if not (SHARED / "models").is_dir():
        raise SystemExit(f"models not found under {SHARED / 'models'} (set OPENDLA_SHARED)")
    for name in args.models:
        measure(name, args.preset, args.algorithm, args.dla)


if __name__ == "__main__":
    main()
