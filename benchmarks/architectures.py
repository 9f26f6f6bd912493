"""Architectures the zoo does not have, run as a user would: partition, bit-exactness,
fidelity to fp32 and speed against onnxruntime, on both presets.

Usage::

    python benchmarks/architectures.py MODEL.onnx ... [--presets nv_small,nv_large]
                                       [--repeat 5]

For each ONNX image model with one ``[1, 3, H, W]`` input (for instance the torchvision
architectures ``scripts/export_torchvision.py`` writes) and each preset:

* the model is calibrated on six scikit-image photos (ImageNet's mean and deviation)
  and partitioned between the DLA and the CPU as ``opendla run --device nvdla`` does;
  the row gives the DLA and CPU subgraphs and the classes of what fell back;
* a seventh photo runs with every tensor the DLA computes compared with the int8 CPU
  reference (``bit-exact``, and how many tensors were compared), and the output with
  onnxruntime's fp32 one (cosine; top-1 agreement for a ``[1, K]`` output);
* speed: nvdla / onnxruntime fp32, one thread each, median of ``--repeat`` alternating
  runs after the warm-ups ``benchmarks/dla_models.py`` takes.

A model that raises is reported with its error (the row says so) and the sweep goes on.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections import Counter
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import accuracy_images as images  # noqa: E402
from benchmarks.dla_models import _medians, _session  # noqa: E402
from tengine_host.devices import get_device  # noqa: E402
from tengine_host.executor import Executor  # noqa: E402
from tengine_host.model import load_model  # noqa: E402
from tengine_host.quant import calibrate  # noqa: E402
from tengine_host.verify import verify_run  # noqa: E402

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "cat", "hubble_deep_field",
          "immunohistochemistry")
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)


def photos(height: int, width: int) -> list[np.ndarray]:
    """The photos as ImageNet-normalised ``[1, 3, H, W]`` float32 inputs."""
    out = []
    for name in PHOTOS:
        x = images.resize(images.photo(name), width, height).astype(np.float32) / 255
        out.append(((x - MEAN) / STD).transpose(2, 0, 1)[None].copy())
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def sweep(path: Path, presets: list[str], repeat: int) -> list[dict]:
    graph = load_model(path)
    (name,) = graph.inputs
    shape = graph.tensors[name].shape
    xs = photos(shape[2], shape[3])
    table = calibrate(graph, [{name: x} for x in xs[:-1]], progress=False)
    test = {name: xs[-1]}
    fp32 = _session(path)
    want = fp32.run(None, test)[0]
    rows = []
    for preset in presets:
        row = {"model": path.stem, "preset": preset}
        try:
            devices = [get_device("nvdla", preset=preset, capture=True), get_device("cpu")]
            with Executor(graph, devices, table) as ex:
                out, _, report = verify_run(ex, test)
                counts = ex.partition.subgraph_counts()
                fallbacks: Counter = Counter()
                for n, op, _ in ex.partition.fallback_reasons():
                    fallbacks[op] += n
            got = np.asarray(out[graph.outputs[0]])
            row.update(dla=counts.get("nvdla", 0), cpu=counts.get("cpu", 0),
                       fallbacks=dict(fallbacks), bit_exact=report.bit_exact,
                       tensors=report.layers_checked, cosine=_cosine(got, want),
                       top1=bool(got.argmax() == want.argmax()) if want.ndim == 2 else None)
            devices = [get_device("nvdla", preset=preset), get_device("cpu")]
            with Executor(graph, devices, table) as ex:
                t = _medians({"nvdla": lambda: ex.run(test),
                              "fp32": lambda: fp32.run(None, test)}, repeat)
            row.update(nvdla_ms=t["nvdla"] * 1e3, ratio=t["nvdla"] / t["fp32"])
        except Exception as exc:            # a row, not the end of the sweep
            row["error"] = f"{type(exc).__name__}: {exc}"
            traceback.print_exc()
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(r: dict) -> str:
    if "error" in r:
        return f"| {r['model']} | {r['preset']} | error: {r['error'][:120]} |"
    fb = ", ".join(f"{op} x{n}" for op, n in r["fallbacks"].items()) or "-"
    top = {None: "", True: ", top-1 kept", False: ", top-1 differs"}[r["top1"]]
    return (f"| {r['model']} | {r['preset']} | {r['dla']} + {r['cpu']} CPU ({fb}) | "
            f"{'yes' if r['bit_exact'] else 'NO'} ({r['tensors']} tensors) | "
            f"{r['cosine']:.4f}{top} | {r['nvdla_ms']:.1f} ms, {r['ratio']:.2f}x |")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+", type=Path, help="ONNX image models")
    p.add_argument("--presets", default="nv_small,nv_large", help="comma-separated presets")
    p.add_argument("--repeat", type=int, default=5, help="timed runs of each engine")
    args = p.parse_args(argv)
    missing = [str(m) for m in args.models if not m.is_file()]
    if missing:
        p.error(f"no such model file(s): {', '.join(missing)}")
    print("| model | preset | DLA subgraphs (fallbacks) | bit-exact | cosine to fp32 | "
          "nvdla, / onnxruntime fp32 |\n|---|---|---|---|---|---|", flush=True)
    failed = 0
    with threadpool_limits(1):
        for path in args.models:
            rows = sweep(path, args.presets.split(","), args.repeat)
            failed += sum("error" in r or not r["bit_exact"] for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
